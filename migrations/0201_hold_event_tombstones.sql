-- Hold event writers no longer serialise on an advisory lock: cursors can
-- commit out of order, and a reader that finds a gap below a cursor it
-- sees settles it with a 'skipped' tombstone (INSERT ... ON CONFLICT DO
-- NOTHING on the cursor waits for the one writer holding it, then yields
-- to its row or takes its place). Readers pass tombstones by; retention
-- prunes them with the rest.
ALTER TABLE hold_events DROP CONSTRAINT hold_events_type_check;
ALTER TABLE hold_events ADD CONSTRAINT hold_events_type_check
    CHECK (type IN ('requested', 'resolved', 'approved_partial', 'warned', 'unapplied', 'skipped'));
