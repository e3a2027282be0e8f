-- Escalation of holds (issue 32): a catalog action or a message policy may
-- remind the approvers after remind_after, and add the escalate_to
-- approvers after escalate_after. escalate_to holds user ids and
-- 'group:<agent group id>' (that group's admins at escalation time), each
-- resolved when the setting is made.
ALTER TABLE action_settings
    ADD COLUMN remind_after_s   INT NOT NULL DEFAULT 0 CHECK (remind_after_s >= 0),
    ADD COLUMN escalate_after_s INT NOT NULL DEFAULT 0 CHECK (escalate_after_s >= 0),
    ADD COLUMN escalate_to      TEXT[] NOT NULL DEFAULT '{}';
ALTER TABLE agent_message_policies
    ADD COLUMN remind_after_s   INT NOT NULL DEFAULT 0 CHECK (remind_after_s >= 0),
    ADD COLUMN escalate_after_s INT NOT NULL DEFAULT 0 CHECK (escalate_after_s >= 0),
    ADD COLUMN escalate_to      TEXT[] NOT NULL DEFAULT '{}';

-- A hold remembers its plan at creation (remind_at, escalate_at,
-- escalate_to) and what was done (reminded_at, escalated_at and the users
-- escalated_to, who may resolve it from then on). The sweep claims a step
-- with a conditional UPDATE (… AND reminded_at IS NULL) in the transaction
-- that writes its event: each step once, whichever replica takes it.
ALTER TABLE holds
    ADD COLUMN remind_at    TIMESTAMPTZ,
    ADD COLUMN escalate_at  TIMESTAMPTZ,
    ADD COLUMN escalate_to  TEXT[] NOT NULL DEFAULT '{}',
    ADD COLUMN reminded_at  TIMESTAMPTZ,
    ADD COLUMN escalated_at TIMESTAMPTZ,
    ADD COLUMN escalated_to TEXT[] NOT NULL DEFAULT '{}';
CREATE INDEX holds_remind_due_idx ON holds (remind_at) WHERE status = 'pending' AND reminded_at IS NULL;
CREATE INDEX holds_escalate_due_idx ON holds (escalate_at) WHERE status = 'pending' AND escalated_at IS NULL;

-- The steps are events (Watch, webhook, chat bridges), once per hold each.
ALTER TABLE hold_events DROP CONSTRAINT hold_events_type_check;
ALTER TABLE hold_events ADD CONSTRAINT hold_events_type_check
    CHECK (type IN ('requested', 'resolved', 'approved_partial', 'warned', 'unapplied', 'skipped', 'reminded', 'escalated'));
DROP INDEX hold_events_once_idx;
CREATE UNIQUE INDEX hold_events_once_idx ON hold_events (hold_id, type)
    WHERE type IN ('requested', 'resolved', 'warned', 'unapplied', 'reminded', 'escalated');
