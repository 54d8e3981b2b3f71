-- Artifact bytes in the database (PostgreSQL only). Several replicas serve one database,
-- and an artifact uploaded through one must download through any: files on one replica's
-- disk cannot do that. SQLite runs on one machine and keeps its files under the data
-- directory. An artifact is stored in pieces of 256 KiB, written and read a few at a time,
-- so neither the upload nor a download holds a whole file in memory.
CREATE TABLE artifact_chunks (
    -- Replacing an artifact (same job and name) keeps its id; its chunks are rewritten
    -- in the same transaction. Deleting the artifact deletes its chunks.
    artifact_id uuid NOT NULL REFERENCES artifacts (id) ON DELETE CASCADE,
    -- 0, 1, 2… in the order the bytes come.
    seq integer NOT NULL CHECK (seq >= 0),
    data bytea NOT NULL,
    PRIMARY KEY (artifact_id, seq)
);
