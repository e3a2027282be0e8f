-- Egress (issue 43): an agent's every new outbound connection is a
-- net.connect decision on its destination. A group's rules and default are
-- facts of that decision, read by the group's key and mirrored in the
-- replicas' snapshots, so they live in the group's config row and the
-- container_configs trigger watches them (the 0200 convention).
--   egress_rules:   [{"host": "*.github.com", "port": 0, "effect": "allow"}, ...]
--                   (port 0: 443 and 80; at most 256 rules, checked by the writer)
--   egress_default: what a destination no rule names gets; '' = hold.
-- And what a group's agent runs with, set by an operator: its command
-- (replacing the image's) and non-secret environment.
ALTER TABLE container_configs
    ADD COLUMN egress_rules JSONB NOT NULL DEFAULT '[]' CHECK (jsonb_typeof(egress_rules) = 'array'),
    ADD COLUMN egress_default TEXT NOT NULL DEFAULT '' CHECK (egress_default IN ('', 'allow', 'hold', 'deny')),
    ADD COLUMN agent_command TEXT[] NOT NULL DEFAULT '{}',
    ADD COLUMN agent_env JSONB NOT NULL DEFAULT '{}' CHECK (jsonb_typeof(agent_env) = 'object');

DROP TRIGGER fact_changed ON container_configs;
CREATE CONSTRAINT TRIGGER fact_changed
    AFTER INSERT OR DELETE OR UPDATE OF agent_group_id, cli_scope, mcp_servers, egress_rules, egress_default ON container_configs
    DEFERRABLE INITIALLY DEFERRED FOR EACH ROW
    EXECUTE FUNCTION fact_changed('agent_group_id');
ALTER TABLE container_configs ENABLE ALWAYS TRIGGER fact_changed;

-- An approved connection is used by the session's next connection to the
-- same destination (approvals.FindApprovedTx): found by session and kind
-- among the approved holds nobody used yet.
CREATE INDEX holds_approved_unused_idx ON holds (session_id, kind, resolved_at) WHERE status = 'approved' AND consumed_at IS NULL;
