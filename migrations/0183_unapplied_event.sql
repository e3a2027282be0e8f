-- An approved hold the server gives up applying is an event too (the
-- approvers are told on Watch and the webhook, not only the requester),
-- once per hold.
ALTER TABLE hold_events DROP CONSTRAINT hold_events_type_check;
ALTER TABLE hold_events ADD CONSTRAINT hold_events_type_check
    CHECK (type IN ('requested', 'resolved', 'approved_partial', 'warned', 'unapplied'));
DROP INDEX hold_events_once_idx;
CREATE UNIQUE INDEX hold_events_once_idx ON hold_events (hold_id, type)
    WHERE type IN ('requested', 'resolved', 'warned', 'unapplied');
