-- Inbound: armed new-agent name captures (seed channel-approval, "new agent").
-- After an approver chooses "new", their next direct message is the agent's
-- name. The arming is kept apart from pending_channel_registrations on
-- purpose: when the registration vanishes some other way (its chat deleted,
-- a manual cleanup), the armed capture still claims the reply, the guard
-- (channels.register) refuses it because nothing is pending, and the reply is
-- consumed without creating anything (the D4 interceptor half).
CREATE TABLE inbound_name_captures (
    user_id            TEXT PRIMARY KEY REFERENCES users (id) ON DELETE CASCADE,
    messaging_group_id TEXT NOT NULL,
    armed_at           TIMESTAMPTZ NOT NULL DEFAULT now()
);
CREATE INDEX inbound_name_captures_mg_idx ON inbound_name_captures (messaging_group_id);
