-- Retention: old decisions and hold events are deleted in batches by every
-- replica. created_at is what hold event pruning scans by.
CREATE INDEX hold_events_created_at_idx ON hold_events (created_at);

-- The highest hold event cursor ever pruned, raised in the same statement
-- that deletes. A Watch resuming after a lower cursor would silently miss
-- events, so it is refused instead. One row.
CREATE TABLE hold_events_pruned (
    singleton BOOLEAN PRIMARY KEY DEFAULT true CHECK (singleton),
    through   BIGINT NOT NULL DEFAULT 0
);
INSERT INTO hold_events_pruned DEFAULT VALUES;
