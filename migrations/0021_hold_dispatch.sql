-- When an approved hold's after-approve handlers ran (the server's replay of
-- an approved command, inbound's admission). They run on the resolving
-- replica right after the commit; one that stopped in between leaves
-- dispatched_at NULL, and another replica's recovery loop runs them later.
ALTER TABLE holds ADD COLUMN dispatched_at TIMESTAMPTZ;
UPDATE holds SET dispatched_at = resolved_at WHERE status = 'approved';
CREATE INDEX holds_undispatched_idx ON holds (resolved_at) WHERE status = 'approved' AND dispatched_at IS NULL;
