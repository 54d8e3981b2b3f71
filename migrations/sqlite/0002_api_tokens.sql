-- API tokens (SQLite). The server authenticates a bearer token by hashing it and looking
-- the hash up here; the secret itself is never stored, so a leaked database leaks no
-- usable token. Timestamps are Unix milliseconds, as in 0001.
CREATE TABLE api_tokens (
    id TEXT PRIMARY KEY NOT NULL,
    name TEXT NOT NULL,
    kind TEXT NOT NULL CHECK (kind IN ('user', 'worker')),
    -- Users only; workers are scoped by the three lists below instead.
    role TEXT CHECK (role IN ('admin', 'operator', 'viewer')),
    -- Lowercase hex SHA-256 of the secret. UNIQUE doubles as the lookup index.
    token_hash TEXT NOT NULL UNIQUE,
    -- The first characters of the secret, to tell tokens apart in a list.
    token_prefix TEXT NOT NULL,
    -- JSON arrays of strings; NULL means unrestricted. Workers only.
    capabilities TEXT CHECK (capabilities IS NULL OR json_type(capabilities) = 'array'),
    allowed_repositories TEXT
        CHECK (allowed_repositories IS NULL OR json_type(allowed_repositories) = 'array'),
    allowed_job_types TEXT
        CHECK (allowed_job_types IS NULL OR json_type(allowed_job_types) = 'array'),
    created_at INTEGER NOT NULL,
    last_used_at INTEGER,
    -- Set once; a revoked token is kept for the audit trail but never matches again.
    revoked_at INTEGER,
    CHECK ((kind = 'user') = (role IS NOT NULL))
) STRICT;
