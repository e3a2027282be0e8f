-- Decision-log export: how far the shipper has delivered the log to the
-- configured sink, as an (at, id) keyset position. One row. Retention never
-- drops past it while export is configured.
CREATE TABLE decision_export (
    singleton  BOOLEAN PRIMARY KEY DEFAULT true CHECK (singleton),
    through_at TIMESTAMPTZ NOT NULL DEFAULT 'epoch',
    through_id TEXT NOT NULL DEFAULT ''
);
INSERT INTO decision_export DEFAULT VALUES;
