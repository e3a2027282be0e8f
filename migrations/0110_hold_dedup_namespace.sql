-- Dedup keys are namespaced by the server: kind / anchor group / session /
-- the caller's key (approvals.ScopedDedupKey). Before, the caller's key was
-- stored raw and matched whatever the kind, so a runner card could carry
-- "sender_admit:<chat>:<sender>" and stand in for the real admission card.
-- Every carried hold (pending ones keep deduplicating; an approved,
-- unconsumed sender_admit is still found by its key) gets the new shape,
-- built from its own columns exactly as CreateHoldTx builds it.
UPDATE holds
SET dedup_key = kind || '/' || COALESCE(agent_group_id, '') || '/' || COALESCE(session_id, '') || '/' || dedup_key
WHERE dedup_key IS NOT NULL AND dedup_key <> '';
