-- A grant is bound to what was decided, and a replay is idempotent per hold.

-- The decided resource (e.g. {"to": "<group>"} for a2a.send), next to the
-- decided action (catalog_action) and payload: a replay must name the same.
ALTER TABLE holds ADD COLUMN resource JSONB NOT NULL DEFAULT '{}' CHECK (jsonb_typeof(resource) = 'object');
-- The decision that consumed the grant: only its citation applies the held
-- payload, whichever runner hosts the session by then.
ALTER TABLE holds ADD COLUMN consumed_by TEXT;
-- When (and with what result) that citation was applied: once, ever.
ALTER TABLE holds ADD COLUMN applied_at TIMESTAMPTZ;
ALTER TABLE holds ADD COLUMN applied_result JSONB;
ALTER TABLE holds ADD CONSTRAINT holds_applied_after_consumed CHECK (applied_at IS NULL OR consumed_by IS NOT NULL);

-- Carry in-flight holds: a consumed grant was consumed by its grant ALLOW,
-- and it was applied when that ALLOW was cited.
UPDATE holds h SET consumed_by = (
    SELECT d.id FROM decisions d
    WHERE d.grant_id = h.id AND d.effect = 'allow' AND d.decided_by = 'grant' AND NOT d.dry_run
    ORDER BY d.at LIMIT 1)
WHERE h.consumed_at IS NOT NULL;
UPDATE holds h SET applied_at = d.cited_at
FROM decisions d WHERE d.id = h.consumed_by AND d.cited_at IS NOT NULL;
-- An a2a hold was decided for its payload's target (what runners send).
UPDATE holds SET resource = jsonb_build_object('to', COALESCE(NULLIF(payload->>'to', ''), payload->>'platform_id'))
WHERE kind = 'a2a_message_gate' AND COALESCE(NULLIF(payload->>'to', ''), payload->>'platform_id') IS NOT NULL;

-- Replays of a hold, found by the grant they named.
CREATE INDEX decisions_grant_idx ON decisions (grant_id) WHERE grant_id <> '';
