-- What a job's agents used in all (PostgreSQL): the totals of the `usage` its steps'
-- `task.step.finished` and `task.step.failed` events carry, kept on the row so the jobs
-- list, the job page, REST and the CLI show them without reading every job's timeline.
-- A jsonb object shaped as contract::StepUsage (`inputTokens`, `cachedInputTokens`,
-- `outputTokens`, `reasoningTokens`, `costUsd`), holding only the figures some step
-- reported; NULL while none reported any, so a job from before this migration simply
-- shows none. The queue adds a step's usage in the transaction that appends its event,
-- under the row lock; transitions never write this column, so a transition's
-- compare-and-set (which compares the state columns only) cannot undo an addition.
ALTER TABLE jobs ADD COLUMN usage jsonb CHECK (usage IS NULL OR jsonb_typeof(usage) = 'object');
