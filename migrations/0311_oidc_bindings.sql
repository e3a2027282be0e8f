-- OIDC sign-in for the console (issue 34). An identity provider's subject
-- becomes a Clawguard user only through a binding an operator made
-- (`ncl users bind-oidc`), never by a guess from an email or a name. The
-- pair (issuer, subject) is what the provider promises is stable and unique.
CREATE TABLE oidc_bindings (
    issuer     TEXT NOT NULL CHECK (issuer <> ''),
    subject    TEXT NOT NULL CHECK (subject <> ''),
    user_id    TEXT NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    created_at TIMESTAMPTZ NOT NULL DEFAULT now(),
    PRIMARY KEY (issuer, subject)
);
CREATE INDEX oidc_bindings_user_idx ON oidc_bindings (user_id);

-- A console session is made from a user token or from an OIDC sign-in
-- through a binding: exactly one of the two. Either going (token deleted,
-- binding removed, user deleted) ends the session.
ALTER TABLE console_sessions ALTER COLUMN token_id DROP NOT NULL,
    ADD COLUMN oidc_issuer TEXT,
    ADD COLUMN oidc_subject TEXT,
    ADD FOREIGN KEY (oidc_issuer, oidc_subject) REFERENCES oidc_bindings (issuer, subject) ON DELETE CASCADE,
    ADD CHECK ((token_id IS NULL) <> (oidc_issuer IS NULL AND oidc_subject IS NULL)),
    ADD CHECK ((oidc_issuer IS NULL) = (oidc_subject IS NULL));
-- Unbinding deletes its sessions: found by this index, not a scan.
CREATE INDEX console_sessions_oidc_idx ON console_sessions (oidc_issuer, oidc_subject) WHERE oidc_issuer IS NOT NULL;
