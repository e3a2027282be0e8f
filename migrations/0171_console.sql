-- The approvals console (server/internal/console).

-- Console sign-ins: a user token exchanged for a session cookie. Only the
-- cookie's SHA-256 is stored; the session dies with its token (revocation
-- is checked on every request, deletion cascades) and at expires_at.
CREATE TABLE console_sessions (
    id_hash    BYTEA PRIMARY KEY,
    token_id   TEXT NOT NULL REFERENCES tokens (id) ON DELETE CASCADE,
    user_id    TEXT NOT NULL,
    csrf       TEXT NOT NULL,
    created_at TIMESTAMPTZ NOT NULL DEFAULT now(),
    expires_at TIMESTAMPTZ NOT NULL
);
CREATE INDEX console_sessions_expires_idx ON console_sessions (expires_at);

-- A hold's page lists the decisions that created it (and, through 0120's
-- decisions_grant_idx, the replays that used it); only the few rows naming a
-- hold enter this partial index.
CREATE INDEX decisions_hold_idx ON decisions (hold_id) WHERE hold_id <> '';
