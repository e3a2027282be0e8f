-- Tokens that expire (issue 34): an optional expiry, after which the token
-- is refused on every replica (the authenticator caches an answer no longer
-- than until the expiry), and the time it was last used, written at most
-- once a minute per token and replica, off the request's path.
ALTER TABLE tokens
    ADD COLUMN expires_at   TIMESTAMPTZ,
    ADD COLUMN last_used_at TIMESTAMPTZ,
    ADD CONSTRAINT tokens_expiry_after_creation CHECK (expires_at IS NULL OR expires_at > created_at);
