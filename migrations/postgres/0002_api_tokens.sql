-- API tokens (PostgreSQL). The server authenticates a bearer token by hashing it and
-- looking the hash up here; the secret itself is never stored, so a leaked database leaks
-- no usable token.
CREATE TABLE api_tokens (
    id uuid PRIMARY KEY,
    name text NOT NULL,
    kind text NOT NULL CHECK (kind IN ('user', 'worker')),
    -- Users only; workers are scoped by the three lists below instead.
    role text CHECK (role IN ('admin', 'operator', 'viewer')),
    -- Lowercase hex SHA-256 of the secret. UNIQUE doubles as the lookup index.
    token_hash text NOT NULL UNIQUE,
    -- The first characters of the secret, to tell tokens apart in a list.
    token_prefix text NOT NULL,
    -- jsonb arrays of strings; NULL means unrestricted. Workers only.
    capabilities jsonb CHECK (capabilities IS NULL OR jsonb_typeof(capabilities) = 'array'),
    allowed_repositories jsonb
        CHECK (allowed_repositories IS NULL OR jsonb_typeof(allowed_repositories) = 'array'),
    allowed_job_types jsonb
        CHECK (allowed_job_types IS NULL OR jsonb_typeof(allowed_job_types) = 'array'),
    created_at timestamptz NOT NULL,
    last_used_at timestamptz,
    -- Set once; a revoked token is kept for the audit trail but never matches again.
    revoked_at timestamptz,
    CHECK ((kind = 'user') = (role IS NOT NULL))
);
