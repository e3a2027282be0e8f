-- Registry: leases, push ordering, session lookups.

-- Set by the one replica that claims a runner's lease expiry (a conditional
-- UPDATE), so each expiry is counted once; cleared when the lease is renewed.
ALTER TABLE runners ADD COLUMN expired_at TIMESTAMPTZ;
CREATE INDEX runners_lease_idx ON runners (lease_expires_at);

-- Pushes of one transaction share created_at; seq keeps their insertion order.
ALTER TABLE runner_pushes ADD COLUMN seq BIGSERIAL;
CREATE INDEX runner_pushes_order_idx ON runner_pushes (runner_id, created_at, seq) WHERE acked_at IS NULL;
CREATE INDEX runner_pushes_session_idx ON runner_pushes (session_id) WHERE acked_at IS NULL;

-- The active session of a group (per messaging group) is looked up on every open.
CREATE INDEX sessions_active_idx ON sessions (agent_group_id, messaging_group_id) WHERE status = 'active';
