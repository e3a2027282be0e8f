-- The chat outbox: agent replies and notices for a chat, kept until the
-- chat's bridge has read them (bridges follow it by cursor, like hold
-- events). Writers take one transaction-scoped advisory lock before
-- inserting, so cursors commit in increasing order and a reader that has
-- passed cursor N never sees a smaller one appear later.
CREATE TABLE chat_outbox (
    cursor             BIGSERIAL PRIMARY KEY,
    channel_type       TEXT NOT NULL CHECK (channel_type <> ''),
    platform_id        TEXT NOT NULL CHECK (platform_id <> ''),
    messaging_group_id TEXT REFERENCES messaging_groups (id) ON DELETE SET NULL,
    session_id         TEXT NOT NULL DEFAULT '',
    agent_group_id     TEXT NOT NULL DEFAULT '',
    kind               TEXT NOT NULL CHECK (kind IN ('reply', 'notice')),
    text               TEXT NOT NULL CHECK (text <> ''),
    created_at         TIMESTAMPTZ NOT NULL DEFAULT now()
);
CREATE INDEX chat_outbox_channel_idx ON chat_outbox (channel_type, cursor);
