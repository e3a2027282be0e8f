-- Leases are judged by the database's clock, with a grace period after the
-- database itself (or every server replica) was unreachable: the lease sweep
-- stamps seen_at each time it runs; a sweep that finds a gap longer than
-- half a lease extends the leases that were live when the gap began, so an
-- outage longer than a lease does not move sessions off healthy runners.
CREATE TABLE registry_clock (
    id      INT PRIMARY KEY CHECK (id = 1),
    seen_at TIMESTAMPTZ NOT NULL
);
INSERT INTO registry_clock (id, seen_at) VALUES (1, now());
