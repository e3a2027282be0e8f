-- The hold-record contract (the seed's migration 019, holds-approver-rule):
--   approver_rule  — 'exclusive' (only approver_user_id) or 'admins-of-scope'
--                    (the anchor group's admin chain, plus approver_user_id as
--                    the recorded delivered-to approver when stamped);
--   approver_scope — blast radius: 'global' holds need an owner or global admin (D1);
--   dedup_key      — at most one live hold per key.
-- In-flight holds are carried across: a named approver was exclusive before
-- this column existed, and the anchor group is stamped from the session so
-- click authorization no longer needs the session fallback.
ALTER TABLE holds
    ADD COLUMN approver_rule TEXT NOT NULL DEFAULT 'admins-of-scope'
        CHECK (approver_rule IN ('exclusive', 'admins-of-scope')),
    ADD COLUMN approver_scope TEXT NOT NULL DEFAULT 'group'
        CHECK (approver_scope IN ('group', 'global')),
    ADD COLUMN dedup_key TEXT,
    ADD COLUMN swept_on_restart BOOLEAN NOT NULL DEFAULT false;

UPDATE holds SET approver_rule = 'exclusive' WHERE approver_user_id IS NOT NULL;

UPDATE holds h SET agent_group_id = s.agent_group_id
  FROM sessions s
 WHERE h.agent_group_id IS NULL AND h.session_id = s.id;

UPDATE holds SET swept_on_restart = true WHERE kind = 'onecli_credential';

ALTER TABLE holds ADD CONSTRAINT holds_exclusive_has_approver
    CHECK (approver_rule <> 'exclusive' OR approver_user_id IS NOT NULL);

CREATE UNIQUE INDEX holds_live_dedup_idx ON holds (dedup_key) WHERE status = 'pending' AND dedup_key IS NOT NULL;
