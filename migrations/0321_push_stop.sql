-- A freeze stops the agents in its scope (issue 32): a 'stop' push, and the
-- 'start' of an unfreeze brings them back.
ALTER TABLE runner_pushes DROP CONSTRAINT runner_pushes_kind_check;
ALTER TABLE runner_pushes ADD CONSTRAINT runner_pushes_kind_check
    CHECK (kind IN ('replay', 'deliver', 'restart', 'notify', 'start', 'stop'));
