-- Standing grants (issue 32): an approver may approve a hold "for this
-- session" or "for N hours" instead of once. The grant is as narrow as the
-- request it approved: the same catalog action and approval kind, the same
-- asking agent group and anchor group, the same resource (target) and the same payload (its
-- SHA-256 over canonical JSON), and, when session-bound, the same session.
-- Where a decision would HOLD, the guard first looks here (live, in the
-- hold's transaction) and ALLOWs a live match instead of asking again.
CREATE TABLE standing_grants (
    id             TEXT PRIMARY KEY,
    hold_id        TEXT NOT NULL UNIQUE REFERENCES holds (id) ON DELETE CASCADE,
    kind           TEXT NOT NULL,
    catalog_action TEXT NOT NULL,
    agent_group_id TEXT NOT NULL,              -- the hold's anchor group
    requester_group_id TEXT NOT NULL,          -- the asking agent's group
    session_id     TEXT NOT NULL DEFAULT '', -- '' = any session of the group
    resource       JSONB NOT NULL DEFAULT '{}',
    payload        JSONB NOT NULL DEFAULT '{}',
    payload_sha256 TEXT NOT NULL,
    approved_by    TEXT[] NOT NULL,
    created_at     TIMESTAMPTZ NOT NULL DEFAULT now(),
    expires_at     TIMESTAMPTZ NOT NULL,
    revoked_at     TIMESTAMPTZ,
    revoked_by     TEXT NOT NULL DEFAULT '',
    uses           BIGINT NOT NULL DEFAULT 0,
    last_used_at   TIMESTAMPTZ,
    CHECK (expires_at > created_at)
);

-- The decision path's lookup: live grants of one group, action and payload.
CREATE INDEX standing_grants_match ON standing_grants (agent_group_id, catalog_action, payload_sha256)
    WHERE revoked_at IS NULL;

-- What each approver of a quorum hold asked for: a standing grant exists only
-- when every approval that counted asked for one; it gets the narrowest
-- (the shortest time, bound to the session when any asked so).
ALTER TABLE hold_approvals
    ADD COLUMN standing_secs    BIGINT NOT NULL DEFAULT 0 CHECK (standing_secs >= 0),
    ADD COLUMN standing_session BOOLEAN NOT NULL DEFAULT false;
