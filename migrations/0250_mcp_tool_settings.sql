-- Guarded MCP servers (issue 31): the runner hosts a group's MCP servers
-- outside the agent's container and asks the guard (mcp.call) before each
-- tools/call. The operator sets an effect per tool, and per server a
-- default for the tools nobody set (no default: hold). Both tables are
-- facts of mcp.call, read by lookup key and mirrored in the replicas'
-- snapshots, so each has the fact_changed triggers of 0200.
CREATE TABLE mcp_server_settings (
    agent_group_id TEXT NOT NULL REFERENCES agent_groups (id) ON DELETE CASCADE,
    server         TEXT NOT NULL,
    default_effect TEXT NOT NULL CHECK (default_effect IN ('allow', 'hold', 'deny')),
    approvals      INT NOT NULL DEFAULT 0 CHECK (approvals >= 0),
    mode           TEXT NOT NULL DEFAULT '' CHECK (mode IN ('', 'enforce', 'audit', 'warn')),
    updated_at     TIMESTAMPTZ NOT NULL DEFAULT now(),
    PRIMARY KEY (agent_group_id, server)
);

CREATE TABLE mcp_tool_settings (
    agent_group_id TEXT NOT NULL REFERENCES agent_groups (id) ON DELETE CASCADE,
    server         TEXT NOT NULL,
    tool           TEXT NOT NULL,
    effect         TEXT NOT NULL CHECK (effect IN ('allow', 'hold', 'deny')),
    approvals      INT NOT NULL DEFAULT 0 CHECK (approvals >= 0),
    mode           TEXT NOT NULL DEFAULT '' CHECK (mode IN ('', 'enforce', 'audit', 'warn')),
    updated_at     TIMESTAMPTZ NOT NULL DEFAULT now(),
    PRIMARY KEY (agent_group_id, server, tool)
);

-- What the runners hosting a server report: the tools it lists (so an
-- operator sees the tools nobody set yet) and its state on each runner.
-- Not facts: the guard never reads them.
CREATE TABLE mcp_server_tools (
    agent_group_id TEXT NOT NULL REFERENCES agent_groups (id) ON DELETE CASCADE,
    server         TEXT NOT NULL,
    tool           TEXT NOT NULL,
    description    TEXT NOT NULL DEFAULT '',
    first_seen     TIMESTAMPTZ NOT NULL DEFAULT now(),
    last_seen      TIMESTAMPTZ NOT NULL DEFAULT now(),
    PRIMARY KEY (agent_group_id, server, tool)
);

CREATE TABLE mcp_server_states (
    agent_group_id TEXT NOT NULL REFERENCES agent_groups (id) ON DELETE CASCADE,
    server         TEXT NOT NULL,
    runner_id      TEXT NOT NULL,
    state          TEXT NOT NULL CHECK (state IN ('running', 'stopped', 'failed')),
    error          TEXT NOT NULL DEFAULT '',
    tools          INT NOT NULL DEFAULT 0,
    reported_at    TIMESTAMPTZ NOT NULL DEFAULT now(),
    PRIMARY KEY (agent_group_id, server, runner_id)
);

CREATE CONSTRAINT TRIGGER fact_changed
    AFTER INSERT OR DELETE OR UPDATE OF agent_group_id, server, default_effect, approvals, mode
    ON mcp_server_settings
    DEFERRABLE INITIALLY DEFERRED FOR EACH ROW
    EXECUTE FUNCTION fact_changed('agent_group_id', 'server');

CREATE CONSTRAINT TRIGGER fact_changed
    AFTER INSERT OR DELETE OR UPDATE OF agent_group_id, server, tool, effect, approvals, mode
    ON mcp_tool_settings
    DEFERRABLE INITIALLY DEFERRED FOR EACH ROW
    EXECUTE FUNCTION fact_changed('agent_group_id', 'server', 'tool');

-- mcp.call also reads which servers a group has (container_configs.mcp_servers):
-- the container_configs trigger now fires on updates of that column too.
DROP TRIGGER fact_changed ON container_configs;
CREATE CONSTRAINT TRIGGER fact_changed AFTER INSERT OR DELETE OR UPDATE OF agent_group_id, cli_scope, mcp_servers ON container_configs
    DEFERRABLE INITIALLY DEFERRED FOR EACH ROW
    EXECUTE FUNCTION fact_changed('agent_group_id');

DO $$
DECLARE
    t TEXT;
BEGIN
    FOREACH t IN ARRAY ARRAY['mcp_server_settings', 'mcp_tool_settings'] LOOP
        EXECUTE format('CREATE TRIGGER fact_truncated AFTER TRUNCATE ON %I FOR EACH STATEMENT EXECUTE FUNCTION fact_truncated()', t);
        EXECUTE format('ALTER TABLE %I ENABLE ALWAYS TRIGGER fact_changed, ENABLE ALWAYS TRIGGER fact_truncated', t);
    END LOOP;
END $$;
ALTER TABLE container_configs ENABLE ALWAYS TRIGGER fact_changed;
