-- The decision log, partitioned by day on `at` so retention drops whole
-- partitions instead of deleting rows (the log is ~all of the database's
-- write volume). A DEFAULT partition catches any row whose day has no
-- partition yet, so an insert never fails; the maintenance loop
-- (server/internal/retention) creates days ahead and drops expired ones.
--
-- A partitioned table's unique indexes must include `at`, so the
-- idempotency key of retried decisions (runner_id, request_id) and its
-- stored answer move to their own table, decision_requests. In-flight
-- retries keep their answers: existing keys are copied across.
--
-- Runs before 0170/0171/0180 on a fresh database and after them on an
-- upgraded one: the new table is made LIKE the old one (whatever columns
-- it has by now), and decisions_hold_idx is rebuilt only when 0171 already
-- made it (otherwise 0171 makes it on the partitioned table).

CREATE TABLE decision_requests (
    runner_id   TEXT NOT NULL,
    request_id  TEXT NOT NULL CHECK (request_id <> ''),
    decision_id TEXT NOT NULL,
    at          TIMESTAMPTZ NOT NULL,
    answer      BYTEA,
    PRIMARY KEY (runner_id, request_id)
);
CREATE INDEX decision_requests_at_idx ON decision_requests (at);
INSERT INTO decision_requests (runner_id, request_id, decision_id, at, answer)
SELECT runner_id, request_id, id, at, answer FROM decisions WHERE request_id <> '';

-- Creates the daily partitions (UTC days) from first to last, skipping
-- those that exist; returns how many it made. A day whose rows already
-- wait in the default partition (the loop was down) is skipped with a
-- warning: its rows stay there until retention deletes them.
CREATE FUNCTION decisions_ensure_partitions(first DATE, last DATE) RETURNS INT LANGUAGE plpgsql AS $$
DECLARE
    d DATE;
    n INT := 0;
BEGIN
    FOR d IN SELECT g::date FROM generate_series(first, last, INTERVAL '1 day') AS g LOOP
        IF to_regclass('decisions_' || to_char(d, 'YYYYMMDD')) IS NULL THEN
            BEGIN
                EXECUTE format('CREATE TABLE %I PARTITION OF decisions FOR VALUES FROM (%L) TO (%L)',
                    'decisions_' || to_char(d, 'YYYYMMDD'),
                    d::timestamp AT TIME ZONE 'UTC', (d + 1)::timestamp AT TIME ZONE 'UTC');
                n := n + 1;
            EXCEPTION WHEN check_violation THEN
                RAISE WARNING 'decisions: no partition for %: the default partition holds rows of that day', d;
            END;
        END IF;
    END LOOP;
    RETURN n;
END;
$$;

DO $$
DECLARE
    had_hold_idx BOOLEAN := to_regclass('decisions_hold_idx') IS NOT NULL;
    oldest DATE;
BEGIN
    ALTER TABLE decisions DROP COLUMN answer;
    ALTER TABLE decisions RENAME TO decisions_unpartitioned;
    CREATE TABLE decisions (LIKE decisions_unpartitioned INCLUDING DEFAULTS INCLUDING CONSTRAINTS)
        PARTITION BY RANGE (at);
    CREATE TABLE decisions_default PARTITION OF decisions DEFAULT;
    -- Days with rows get their partition (at most the last 31); older rows,
    -- if any, share one partition of everything before those days, dropped
    -- whole once retention passes its end. The default partition stays
    -- empty: making a partition scans it under the parent's lock.
    SELECT GREATEST(min(at) AT TIME ZONE 'UTC', now() AT TIME ZONE 'UTC' - INTERVAL '31 days')::date
        INTO oldest FROM decisions_unpartitioned HAVING count(*) > 0;
    oldest := LEAST(COALESCE(oldest, current_date), (now() AT TIME ZONE 'UTC')::date);
    PERFORM decisions_ensure_partitions(oldest, (now() AT TIME ZONE 'UTC')::date + 3);
    IF EXISTS (SELECT 1 FROM decisions_unpartitioned WHERE at < oldest::timestamp AT TIME ZONE 'UTC') THEN
        EXECUTE format('CREATE TABLE %I PARTITION OF decisions FOR VALUES FROM (MINVALUE) TO (%L)',
            'decisions_before_' || to_char(oldest, 'YYYYMMDD'), oldest::timestamp AT TIME ZONE 'UTC');
    END IF;
    INSERT INTO decisions SELECT * FROM decisions_unpartitioned;
    DROP TABLE decisions_unpartitioned;

    -- Indexes that pay for themselves: the key (citations, GetDecision),
    -- newest-first listing, a viewer's groups, and the few rows naming a
    -- grant or a hold. decisions_effect_idx is gone: listing by effect
    -- walks decisions_at_idx and filters, and every decision paid for it.
    ALTER TABLE decisions ADD PRIMARY KEY (id, at);
    CREATE INDEX decisions_at_idx ON decisions (at DESC);
    CREATE INDEX decisions_group_idx ON decisions (agent_group_id, at DESC);
    CREATE INDEX decisions_grant_idx ON decisions (grant_id) WHERE grant_id <> '';
    IF had_hold_idx THEN
        CREATE INDEX decisions_hold_idx ON decisions (hold_id) WHERE hold_id <> '';
    END IF;
END;
$$;
