-- The decision log keyed by (at, id) instead of (id, at), and
-- decisions_at_idx gone: the key now serves newest-first listing, keyset
-- paging and the export's (at, id) walk, so every decision writes one index
-- entry fewer (about 80 bytes of WAL and an index insert of Postgres' CPU,
-- issue 48). A lookup by id alone would walk every partition's key; a
-- decision id carries the millisecond its row's at was read at
-- (store.NewOrderedID), so lookups name the at range too
-- (guard.DecisionKey), and Postgres reads one partition's key at one spot.
--
-- On an upgraded database this rebuilds the log's key on every partition,
-- under the table's lock: the log is unavailable for the rebuild's length
-- (seconds per million rows).
ALTER TABLE decisions DROP CONSTRAINT decisions_pkey;
ALTER TABLE decisions ADD PRIMARY KEY (at, id);
DROP INDEX decisions_at_idx;
