-- Quorum approvals and enforcement modes (issue 18).

-- Operator settings per catalog action: how many distinct approvals its
-- holds need (0 = the approver scope's default) and its enforcement mode.
CREATE TABLE action_settings (
    action     TEXT PRIMARY KEY CHECK (action <> ''),
    approvals  INT  NOT NULL DEFAULT 0 CHECK (approvals BETWEEN 0 AND 10),
    mode       TEXT NOT NULL DEFAULT 'enforce' CHECK (mode IN ('enforce', 'audit', 'warn')),
    updated_at TIMESTAMPTZ NOT NULL DEFAULT now()
);

-- A message policy's own mode ('' = inherit a2a.send's).
ALTER TABLE agent_message_policies
    ADD COLUMN mode TEXT NOT NULL DEFAULT '' CHECK (mode IN ('', 'enforce', 'audit', 'warn'));

-- Per group: the approvals every hold anchored to it needs (0 = default).
ALTER TABLE container_configs
    ADD COLUMN hold_approvals INT NOT NULL DEFAULT 0 CHECK (hold_approvals BETWEEN 0 AND 10);

-- A hold needs approvals_required distinct approvals; in-flight holds keep
-- needing one.
ALTER TABLE holds
    ADD COLUMN approvals_required INT NOT NULL DEFAULT 1 CHECK (approvals_required BETWEEN 1 AND 10);

-- Each approval toward a quorum; the primary key makes a second click by
-- the same user count once.
CREATE TABLE hold_approvals (
    hold_id     TEXT NOT NULL REFERENCES holds (id) ON DELETE CASCADE,
    user_id     TEXT NOT NULL CHECK (user_id <> ''),
    approved_at TIMESTAMPTZ NOT NULL DEFAULT now(),
    PRIMARY KEY (hold_id, user_id)
);

-- Lifecycle events gain approved_partial (one per approval short of the
-- quorum) and warned (a warn-mode gate let an action run). Requested and
-- resolved stay exactly once per hold.
ALTER TABLE hold_events DROP CONSTRAINT hold_events_type_check;
ALTER TABLE hold_events ADD CONSTRAINT hold_events_type_check
    CHECK (type IN ('requested', 'resolved', 'approved_partial', 'warned'));
ALTER TABLE hold_events DROP CONSTRAINT hold_events_hold_id_type_key;
CREATE UNIQUE INDEX hold_events_once_idx ON hold_events (hold_id, type) WHERE type IN ('requested', 'resolved', 'warned');
ALTER TABLE hold_events ADD COLUMN approvals_remaining INT NOT NULL DEFAULT 0;

-- The decision log records the gate's mode and, when the mode relaxed the
-- answer, what enforce would have answered.
ALTER TABLE decisions
    ADD COLUMN mode TEXT NOT NULL DEFAULT '',
    ADD COLUMN would_effect TEXT NOT NULL DEFAULT '' CHECK (would_effect IN ('', 'hold', 'deny')),
    ADD COLUMN would_reason TEXT NOT NULL DEFAULT '';
