-- Reject with reason (seed awaiting_reason): an approver who picks "Reject
-- with reason…" on a card with a requester to tell arms a capture; the hold
-- stays pending (expiry still ends it) but only that approver may resolve it
-- until then, and their next direct message through RouteInbound is the
-- reason. The state lives on the hold row, so it survives restarts and every
-- replica sees it; one capture per approver (arming another clears it).
-- Existing rows (in-flight holds included) start with no capture armed.
ALTER TABLE holds
    ADD COLUMN awaiting_reason_from TEXT NOT NULL DEFAULT '',
    ADD COLUMN awaiting_reason_at   TIMESTAMPTZ;
CREATE INDEX holds_awaiting_reason_idx ON holds (awaiting_reason_from, awaiting_reason_at DESC)
    WHERE status = 'pending' AND awaiting_reason_from <> '';
