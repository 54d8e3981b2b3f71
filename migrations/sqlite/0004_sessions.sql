-- Dashboard sessions and one-time login codes (SQLite). A person logs in to the dashboard
-- with a user token; the server answers with a session cookie whose secret is stored here
-- only as its SHA-256, pointing at that token, so revoking the token ends its sessions.
-- `stepwise serve` prints a login URL that carries a one-time code: a row with purpose
-- 'login', deleted when it is used. Timestamps are Unix milliseconds, as in 0001.
CREATE TABLE sessions (
    -- Lowercase hex SHA-256 of the cookie's or the code's secret.
    secret_hash TEXT PRIMARY KEY NOT NULL,
    token_id TEXT NOT NULL REFERENCES api_tokens (id),
    purpose TEXT NOT NULL CHECK (purpose IN ('session', 'login')),
    created_at INTEGER NOT NULL,
    expires_at INTEGER NOT NULL
) STRICT;

-- Expired rows are deleted whenever a new one is made; this finds them without a scan.
CREATE INDEX sessions_by_expiry ON sessions (expires_at);
