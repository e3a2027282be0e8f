-- The control plane's schema. Enums are TEXT with CHECK constraints (readable
-- in psql, cheap to extend by migration); every dependent row of an agent
-- group cascades with it (the seed's group-delete set).

CREATE TABLE agent_groups (
    id          TEXT PRIMARY KEY,
    name        TEXT NOT NULL UNIQUE CHECK (name <> ''),
    base_image  TEXT NOT NULL DEFAULT '',
    pinned_host TEXT NOT NULL DEFAULT '',
    created_at  TIMESTAMPTZ NOT NULL DEFAULT now()
);

-- One row per group; a missing row reads as cli_scope = 'group'.
CREATE TABLE container_configs (
    agent_group_id TEXT PRIMARY KEY REFERENCES agent_groups (id) ON DELETE CASCADE,
    cli_scope      TEXT NOT NULL DEFAULT 'group' CHECK (cli_scope IN ('disabled', 'group', 'global')),
    cpus           TEXT NOT NULL DEFAULT '',
    memory         TEXT NOT NULL DEFAULT '',
    apt_packages   TEXT[] NOT NULL DEFAULT '{}',
    npm_packages   TEXT[] NOT NULL DEFAULT '{}',
    mcp_servers    JSONB NOT NULL DEFAULT '[]' CHECK (jsonb_typeof(mcp_servers) = 'array'),
    version        BIGINT NOT NULL DEFAULT 1,
    updated_at     TIMESTAMPTZ NOT NULL DEFAULT now()
);

CREATE TABLE users (
    id           TEXT PRIMARY KEY CHECK (id ~ '^[a-z0-9_-]+:.+$'),
    display_name TEXT NOT NULL DEFAULT '',
    created_at   TIMESTAMPTZ NOT NULL DEFAULT now()
);

-- Owners are always global; admins are global (NULL group) or scoped.
CREATE TABLE user_roles (
    user_id        TEXT NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    role           TEXT NOT NULL CHECK (role IN ('owner', 'admin')),
    agent_group_id TEXT REFERENCES agent_groups (id) ON DELETE CASCADE,
    granted_at     TIMESTAMPTZ NOT NULL DEFAULT now(),
    CHECK (role <> 'owner' OR agent_group_id IS NULL),
    UNIQUE NULLS NOT DISTINCT (user_id, role, agent_group_id)
);
CREATE INDEX user_roles_group_idx ON user_roles (agent_group_id, role, granted_at);

-- Where approval cards reach a user, per channel type.
CREATE TABLE user_dms (
    user_id      TEXT NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    channel_type TEXT NOT NULL CHECK (channel_type <> ''),
    address      TEXT NOT NULL CHECK (address <> ''),
    created_at   TIMESTAMPTZ NOT NULL DEFAULT now(),
    PRIMARY KEY (user_id, channel_type)
);

CREATE TABLE messaging_groups (
    id                    TEXT PRIMARY KEY,
    channel_type          TEXT NOT NULL CHECK (channel_type <> ''),
    platform_id           TEXT NOT NULL CHECK (platform_id <> ''),
    name                  TEXT NOT NULL DEFAULT '',
    is_group              BOOLEAN NOT NULL DEFAULT false,
    unknown_sender_policy TEXT NOT NULL DEFAULT 'strict'
        CHECK (unknown_sender_policy IN ('public', 'request_approval', 'strict')),
    denied_at             TIMESTAMPTZ,
    created_at            TIMESTAMPTZ NOT NULL DEFAULT now(),
    UNIQUE (channel_type, platform_id)
);

-- Wirings: which agent group a chat talks to.
CREATE TABLE messaging_group_agents (
    id                 TEXT PRIMARY KEY,
    messaging_group_id TEXT NOT NULL REFERENCES messaging_groups (id) ON DELETE CASCADE,
    agent_group_id     TEXT NOT NULL REFERENCES agent_groups (id) ON DELETE CASCADE,
    created_at         TIMESTAMPTZ NOT NULL DEFAULT now(),
    UNIQUE (messaging_group_id, agent_group_id)
);
CREATE INDEX messaging_group_agents_group_idx ON messaging_group_agents (agent_group_id);

CREATE TABLE agent_group_members (
    agent_group_id TEXT NOT NULL REFERENCES agent_groups (id) ON DELETE CASCADE,
    user_id        TEXT NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    added_at       TIMESTAMPTZ NOT NULL DEFAULT now(),
    PRIMARY KEY (agent_group_id, user_id)
);

-- Runners: one per host, holding a lease.
CREATE TABLE runners (
    id               TEXT PRIMARY KEY CHECK (id <> ''),
    host             TEXT NOT NULL DEFAULT '',
    version          TEXT NOT NULL DEFAULT '',
    capabilities     TEXT[] NOT NULL DEFAULT '{}',
    labels           JSONB NOT NULL DEFAULT '{}',
    delivery_actions JSONB NOT NULL DEFAULT '[]',
    lease_expires_at TIMESTAMPTZ NOT NULL DEFAULT now(),
    -- Random per process: a second process claiming a live id is refused.
    instance_id      TEXT NOT NULL DEFAULT '',
    registered_at    TIMESTAMPTZ NOT NULL DEFAULT now()
);

CREATE TABLE sessions (
    id                 TEXT PRIMARY KEY,
    agent_group_id     TEXT NOT NULL REFERENCES agent_groups (id) ON DELETE CASCADE,
    messaging_group_id TEXT REFERENCES messaging_groups (id) ON DELETE SET NULL,
    runner_id          TEXT REFERENCES runners (id) ON DELETE SET NULL,
    status             TEXT NOT NULL DEFAULT 'active' CHECK (status IN ('active', 'stopped')),
    created_at         TIMESTAMPTZ NOT NULL DEFAULT now(),
    last_active_at     TIMESTAMPTZ NOT NULL DEFAULT now()
);
CREATE INDEX sessions_group_idx ON sessions (agent_group_id);
CREATE INDEX sessions_runner_idx ON sessions (runner_id);

CREATE TABLE session_events (
    id         BIGSERIAL PRIMARY KEY,
    session_id TEXT NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
    direction  TEXT NOT NULL CHECK (direction IN ('in', 'out')),
    kind       TEXT NOT NULL CHECK (kind IN ('message', 'notice', 'action')),
    body       JSONB NOT NULL DEFAULT '{}',
    created_at TIMESTAMPTZ NOT NULL DEFAULT now()
);
CREATE INDEX session_events_session_idx ON session_events (session_id, id);

-- Questions an agent asked a human (cascade with the session and group).
CREATE TABLE pending_questions (
    id             TEXT PRIMARY KEY,
    session_id     TEXT NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
    agent_group_id TEXT NOT NULL REFERENCES agent_groups (id) ON DELETE CASCADE,
    question       TEXT NOT NULL,
    created_at     TIMESTAMPTZ NOT NULL DEFAULT now()
);

-- Destinations a group may message: another agent group or a chat.
CREATE TABLE agent_destinations (
    agent_group_id            TEXT NOT NULL REFERENCES agent_groups (id) ON DELETE CASCADE,
    name                      TEXT NOT NULL CHECK (name <> ''),
    target_agent_group_id     TEXT REFERENCES agent_groups (id) ON DELETE CASCADE,
    target_messaging_group_id TEXT REFERENCES messaging_groups (id) ON DELETE CASCADE,
    created_at                TIMESTAMPTZ NOT NULL DEFAULT now(),
    PRIMARY KEY (agent_group_id, name),
    CHECK ((target_agent_group_id IS NULL) <> (target_messaging_group_id IS NULL))
);
CREATE INDEX agent_destinations_target_idx ON agent_destinations (agent_group_id, target_agent_group_id);

-- Messages from one group to another wait for a named approver. Removed with either group.
CREATE TABLE agent_message_policies (
    from_agent_group_id TEXT NOT NULL REFERENCES agent_groups (id) ON DELETE CASCADE,
    to_agent_group_id   TEXT NOT NULL REFERENCES agent_groups (id) ON DELETE CASCADE,
    approver_user_id    TEXT NOT NULL CHECK (approver_user_id <> ''),
    created_at          TIMESTAMPTZ NOT NULL DEFAULT now(),
    PRIMARY KEY (from_agent_group_id, to_agent_group_id)
);

-- Holds: one record for every kind. This is the pre-contract shape
-- (approver_user_id only); 0002 lands the approver rule, scope and dedup key.
CREATE TABLE holds (
    id                  TEXT PRIMARY KEY,
    kind                TEXT NOT NULL CHECK (kind <> ''),
    catalog_action      TEXT NOT NULL DEFAULT '',
    payload             JSONB NOT NULL DEFAULT '{}',
    session_id          TEXT REFERENCES sessions (id) ON DELETE CASCADE,
    agent_group_id      TEXT REFERENCES agent_groups (id) ON DELETE CASCADE,
    requester           JSONB NOT NULL DEFAULT '{}',
    approver_user_id    TEXT,
    status              TEXT NOT NULL DEFAULT 'pending'
        CHECK (status IN ('pending', 'approved', 'rejected', 'expired', 'swept')),
    title               TEXT NOT NULL DEFAULT '',
    question            TEXT NOT NULL DEFAULT '',
    options             JSONB NOT NULL DEFAULT '[]' CHECK (jsonb_typeof(options) = 'array'),
    delivered_to        TEXT,
    origin_channel_type TEXT NOT NULL DEFAULT '',
    delivery_action     TEXT NOT NULL DEFAULT '',
    expires_at          TIMESTAMPTZ,
    created_at          TIMESTAMPTZ NOT NULL DEFAULT now(),
    resolved_at         TIMESTAMPTZ,
    resolver            TEXT NOT NULL DEFAULT '',
    choice              TEXT NOT NULL DEFAULT '',
    reason              TEXT NOT NULL DEFAULT '' CHECK (char_length(reason) <= 280),
    consumed_at         TIMESTAMPTZ,
    CHECK ((status = 'pending') = (resolved_at IS NULL)),
    CHECK (consumed_at IS NULL OR status = 'approved')
);
CREATE INDEX holds_pending_idx ON holds (created_at) WHERE status = 'pending';
CREATE INDEX holds_expiry_idx ON holds (expires_at) WHERE status = 'pending' AND expires_at IS NOT NULL;
CREATE INDEX holds_group_idx ON holds (agent_group_id);
CREATE INDEX holds_session_idx ON holds (session_id);

-- Hold lifecycle events: the table is the truth, NOTIFY is the wake-up.
CREATE TABLE hold_events (
    cursor     BIGSERIAL PRIMARY KEY,
    hold_id    TEXT NOT NULL,
    type       TEXT NOT NULL CHECK (type IN ('requested', 'resolved')),
    outcome    TEXT CHECK (outcome IN ('approve', 'reject', 'expire', 'sweep')),
    resolver   TEXT NOT NULL DEFAULT '',
    undelivered BOOLEAN NOT NULL DEFAULT false,
    hold       JSONB NOT NULL,
    created_at TIMESTAMPTZ NOT NULL DEFAULT now(),
    CHECK ((type = 'resolved') = (outcome IS NOT NULL)),
    -- Exactly once: one requested and one resolved event per hold.
    UNIQUE (hold_id, type)
);

CREATE FUNCTION notify_hold_event() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('clawguard_hold_events', NEW.cursor::text);
    RETURN NEW;
END;
$$;
CREATE TRIGGER hold_events_notify AFTER INSERT ON hold_events
    FOR EACH ROW EXECUTE FUNCTION notify_hold_event();

-- The decision log: every decision, dry runs included.
CREATE TABLE decisions (
    id             TEXT PRIMARY KEY,
    at             TIMESTAMPTZ NOT NULL DEFAULT now(),
    action         TEXT NOT NULL,
    actor          JSONB NOT NULL,
    actor_kind     TEXT NOT NULL CHECK (actor_kind IN ('host', 'agent', 'human', 'system')),
    agent_group_id TEXT,
    session_id     TEXT,
    effect         TEXT NOT NULL CHECK (effect IN ('allow', 'hold', 'deny')),
    reason         TEXT NOT NULL DEFAULT '',
    decided_by     TEXT NOT NULL DEFAULT '',
    grant_id       TEXT NOT NULL DEFAULT '',
    hold_id        TEXT NOT NULL DEFAULT '',
    latency_us     BIGINT NOT NULL DEFAULT 0,
    dry_run        BOOLEAN NOT NULL DEFAULT false,
    runner_id      TEXT NOT NULL DEFAULT '',
    request_id     TEXT NOT NULL DEFAULT '',
    -- Set when a runner's mutation cites this ALLOW (a citation is single-use).
    cited_at       TIMESTAMPTZ
);
CREATE INDEX decisions_at_idx ON decisions (at DESC);
CREATE INDEX decisions_effect_idx ON decisions (effect, at DESC);
CREATE INDEX decisions_group_idx ON decisions (agent_group_id, at DESC);
CREATE UNIQUE INDEX decisions_request_idx ON decisions (runner_id, request_id) WHERE request_id <> '';

-- Durable work for runners, stored until acknowledged.
CREATE TABLE runner_pushes (
    id             TEXT PRIMARY KEY,
    runner_id      TEXT REFERENCES runners (id) ON DELETE SET NULL,
    session_id     TEXT REFERENCES sessions (id) ON DELETE CASCADE,
    kind           TEXT NOT NULL CHECK (kind IN ('replay', 'deliver', 'restart', 'notify', 'start')),
    body           BYTEA NOT NULL,
    created_at     TIMESTAMPTZ NOT NULL DEFAULT now(),
    acked_at       TIMESTAMPTZ,
    attempts       INT NOT NULL DEFAULT 0,
    last_error     TEXT NOT NULL DEFAULT ''
);
CREATE INDEX runner_pushes_pending_idx ON runner_pushes (runner_id, created_at) WHERE acked_at IS NULL;

CREATE FUNCTION notify_runner_push() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.runner_id IS NOT NULL AND NEW.acked_at IS NULL THEN
        PERFORM pg_notify('clawguard_runner_pushes', NEW.runner_id);
    END IF;
    RETURN NEW;
END;
$$;
CREATE TRIGGER runner_pushes_notify AFTER INSERT OR UPDATE OF runner_id ON runner_pushes
    FOR EACH ROW EXECUTE FUNCTION notify_runner_push();

-- API tokens, stored as SHA-256 hashes.
CREATE TABLE tokens (
    id         TEXT PRIMARY KEY,
    kind       TEXT NOT NULL CHECK (kind IN ('operator', 'runner', 'bridge', 'user')),
    name       TEXT NOT NULL DEFAULT '',
    hash       BYTEA NOT NULL UNIQUE,
    runner_id  TEXT,
    user_id    TEXT REFERENCES users (id) ON DELETE CASCADE,
    created_at TIMESTAMPTZ NOT NULL DEFAULT now(),
    revoked_at TIMESTAMPTZ,
    CHECK ((kind = 'runner') = (runner_id IS NOT NULL)),
    CHECK ((kind = 'user') = (user_id IS NOT NULL))
);

-- Channel registrations awaiting an owner or global admin (seed channel-approval).
CREATE TABLE pending_channel_registrations (
    messaging_group_id TEXT PRIMARY KEY REFERENCES messaging_groups (id) ON DELETE CASCADE,
    agent_group_id     TEXT REFERENCES agent_groups (id) ON DELETE CASCADE,
    hold_id            TEXT,
    original_message   JSONB NOT NULL DEFAULT '{}',
    approver_user_id   TEXT NOT NULL DEFAULT '',
    -- Set while the approver's next message is captured as a new agent's name.
    awaiting_name_from TEXT NOT NULL DEFAULT '',
    created_at         TIMESTAMPTZ NOT NULL DEFAULT now()
);

-- Inbound messages that were not routed, and why.
CREATE TABLE dropped_messages (
    id                 BIGSERIAL PRIMARY KEY,
    messaging_group_id TEXT REFERENCES messaging_groups (id) ON DELETE CASCADE,
    sender_user_id     TEXT NOT NULL DEFAULT '',
    reason             TEXT NOT NULL,
    message            JSONB NOT NULL DEFAULT '{}',
    created_at         TIMESTAMPTZ NOT NULL DEFAULT now()
);
