-- Dashboard sessions and one-time login codes (PostgreSQL). A person logs in to the
-- dashboard with a user token; the server answers with a session cookie whose secret is
-- stored here only as its SHA-256, pointing at that token, so revoking the token ends its
-- sessions. `stepwise serve` prints a login URL that carries a one-time code: a row with
-- purpose 'login', deleted when it is used.
CREATE TABLE sessions (
    -- Lowercase hex SHA-256 of the cookie's or the code's secret.
    secret_hash text PRIMARY KEY,
    token_id uuid NOT NULL REFERENCES api_tokens (id),
    purpose text NOT NULL CHECK (purpose IN ('session', 'login')),
    created_at timestamptz NOT NULL,
    expires_at timestamptz NOT NULL
);

-- Expired rows are deleted whenever a new one is made; this finds them without a scan.
CREATE INDEX sessions_by_expiry ON sessions (expires_at);
