-- Guard: the stored answer of a decision made with a request id, so a retried
-- Decide (same runner, same request_id) gets the original answer back and
-- creates nothing twice. NULL for decisions made without a request id.
ALTER TABLE decisions ADD COLUMN answer BYTEA;
