-- What a job's agents used in all (SQLite; see the PostgreSQL migration of the same
-- number, which says why). A JSON object shaped as contract::StepUsage, NULL while no step
-- reported any usage. Numbered 0007 although SQLite has no 0006 (PostgreSQL's artifact
-- chunks), so one change keeps one number on both backends.
ALTER TABLE jobs ADD COLUMN usage TEXT
    CHECK (usage IS NULL OR (json_valid(usage) AND json_type(usage) = 'object'));
