-- Approved => applied exactly once, or the approver and requester are told
-- why not: the reconciler re-sends the replay of an approved hold that was
-- not applied and has no replay in flight, a bounded number of times.

-- Replays the reconciler sent, when it last looked, and the terminal answer
-- when it gave up (the hold stays approved; unapplied_reason says why).
ALTER TABLE holds ADD COLUMN replay_attempts INT NOT NULL DEFAULT 0;
ALTER TABLE holds ADD COLUMN replay_checked_at TIMESTAMPTZ;
ALTER TABLE holds ADD COLUMN unapplied_at TIMESTAMPTZ;
ALTER TABLE holds ADD COLUMN unapplied_reason TEXT NOT NULL DEFAULT '';
CREATE INDEX holds_unapplied_idx ON holds (resolved_at)
    WHERE status = 'approved' AND delivery_action <> '' AND applied_at IS NULL AND unapplied_at IS NULL;

-- The hold a replay push carries, so "is its replay in flight?" is one
-- index probe. Pushes stored before this carry none: the reconciler may
-- send such a hold's replay once more, which the per-hold idempotent replay
-- answers without a second application.
ALTER TABLE runner_pushes ADD COLUMN hold_id TEXT;
CREATE INDEX runner_pushes_hold_idx ON runner_pushes (hold_id) WHERE hold_id IS NOT NULL AND acked_at IS NULL;

-- Carried holds: one whose grant was consumed before this upgrade and whose
-- application was not recorded ran under the old protocol (its runner
-- acked it); it is not re-sent. An approved, unconsumed one is exactly an
-- approval the old protocol could lose: the reconciler picks it up.
UPDATE holds SET unapplied_at = now(),
    unapplied_reason = 'replayed before reconciliation existed (upgrade); its outcome was reported to the agent then'
WHERE status = 'approved' AND delivery_action <> '' AND consumed_at IS NOT NULL AND applied_at IS NULL;
