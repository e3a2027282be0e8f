-- runner_pushes_pending_idx (runner_id, created_at) WHERE acked_at IS NULL
-- is a prefix of runner_pushes_order_idx (runner_id, created_at, seq) with
-- the same predicate (0030): every read it serves, the other serves too,
-- and each push's INSERT and its ack (which leaves both predicates) wrote
-- both.
DROP INDEX IF EXISTS runner_pushes_pending_idx;
