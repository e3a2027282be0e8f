-- A server-run replay (an approved admin command) the guard could not
-- decide is dispatched again later instead of being dropped: how many
-- times it was tried and when it may be tried next.
ALTER TABLE holds
    ADD COLUMN dispatch_attempts INT NOT NULL DEFAULT 0,
    ADD COLUMN dispatch_after TIMESTAMPTZ;
