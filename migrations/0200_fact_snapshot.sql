-- The fact snapshot (server/internal/snapshot): every replica keeps the rows
-- the guard's lookups read in memory, exact at a revision, so a decision
-- needs no read of them. fact_revision is that revision: one bump per
-- transaction that changes a mirrored row, taken by a deferred trigger, so
-- the row lock that orders revisions by commit is held only while the
-- transaction commits. fact_changes keeps the lookup keys each revision
-- changed; a replica catches up by re-reading those keys at the new
-- revision. A decision made from a replica's copy is logged only while
-- fact_revision still equals the copy's revision (the guard's check, in the
-- log INSERT): a committed change the copy has not applied sends the
-- decision down the live path instead, so no replica ever answers from a
-- stale copy. The NOTIFY only wakes the replicas early.
CREATE TABLE fact_revision (
    one  BOOLEAN PRIMARY KEY DEFAULT true CHECK (one),
    rev  BIGINT NOT NULL DEFAULT 0,
    xact XID8
);
INSERT INTO fact_revision DEFAULT VALUES;

CREATE TABLE fact_changes (
    rev        BIGINT NOT NULL,
    table_name TEXT NOT NULL,
    key        TEXT[], -- the lookup key's values in the trigger's column order; NULL = every row (TRUNCATE)
    at         TIMESTAMPTZ NOT NULL DEFAULT now()
);
CREATE INDEX fact_changes_rev_idx ON fact_changes (rev);

-- This transaction's revision: bumped by its first change, read again after.
CREATE FUNCTION fact_revision_bump() RETURNS BIGINT LANGUAGE plpgsql AS $$
DECLARE
    r BIGINT;
BEGIN
    UPDATE fact_revision SET rev = rev + 1, xact = pg_current_xact_id()
     WHERE xact IS DISTINCT FROM pg_current_xact_id()
    RETURNING rev INTO r;
    IF r IS NULL THEN
        SELECT rev INTO r FROM fact_revision;
    END IF;
    PERFORM pg_notify('clawguard_facts', '');
    RETURN r;
END $$;

-- A mirrored row changed: record its lookup key (the trigger's arguments
-- name the key columns), before and after an update that moved it.
CREATE FUNCTION fact_changed() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    r      BIGINT := fact_revision_bump();
    newkey TEXT[];
    oldkey TEXT[];
BEGIN
    IF TG_OP <> 'DELETE' THEN
        SELECT array_agg(to_jsonb(NEW) ->> c ORDER BY i) INTO newkey FROM unnest(TG_ARGV) WITH ORDINALITY AS a(c, i);
    END IF;
    IF TG_OP <> 'INSERT' THEN
        SELECT array_agg(to_jsonb(OLD) ->> c ORDER BY i) INTO oldkey FROM unnest(TG_ARGV) WITH ORDINALITY AS a(c, i);
    END IF;
    INSERT INTO fact_changes (rev, table_name, key)
    SELECT DISTINCT r, TG_TABLE_NAME, k FROM (VALUES (newkey), (oldkey)) AS v(k) WHERE k IS NOT NULL;
    RETURN NULL;
END $$;

CREATE FUNCTION fact_truncated() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO fact_changes (rev, table_name, key) VALUES (fact_revision_bump(), TG_TABLE_NAME, NULL);
    RETURN NULL;
END $$;

-- One row trigger per mirrored table: its arguments are the lookup key's
-- columns, its UPDATE OF list every column the snapshot mirrors (the key
-- and the values), so an update of anything else (sessions.last_active_at)
-- bumps nothing. The server checks both against its catalog at start.
-- ENABLE ALWAYS: they fire under session_replication_role = replica too.
CREATE CONSTRAINT TRIGGER fact_changed AFTER INSERT OR DELETE OR UPDATE OF id ON agent_groups
    DEFERRABLE INITIALLY DEFERRED FOR EACH ROW
    EXECUTE FUNCTION fact_changed('id');

CREATE CONSTRAINT TRIGGER fact_changed AFTER INSERT OR DELETE OR UPDATE OF agent_group_id, target_agent_group_id ON agent_destinations
    DEFERRABLE INITIALLY DEFERRED FOR EACH ROW
    EXECUTE FUNCTION fact_changed('agent_group_id', 'target_agent_group_id');

CREATE CONSTRAINT TRIGGER fact_changed
    AFTER INSERT OR DELETE OR UPDATE OF from_agent_group_id, to_agent_group_id, approver_user_id, also_approvers, approvals, mode
    ON agent_message_policies
    DEFERRABLE INITIALLY DEFERRED FOR EACH ROW
    EXECUTE FUNCTION fact_changed('from_agent_group_id', 'to_agent_group_id');

CREATE CONSTRAINT TRIGGER fact_changed AFTER INSERT OR DELETE OR UPDATE OF agent_group_id, cli_scope ON container_configs
    DEFERRABLE INITIALLY DEFERRED FOR EACH ROW
    EXECUTE FUNCTION fact_changed('agent_group_id');

CREATE CONSTRAINT TRIGGER fact_changed AFTER INSERT OR DELETE OR UPDATE OF action, mode ON action_settings
    DEFERRABLE INITIALLY DEFERRED FOR EACH ROW
    EXECUTE FUNCTION fact_changed('action');

CREATE CONSTRAINT TRIGGER fact_changed AFTER INSERT OR DELETE OR UPDATE OF id, agent_group_id, runner_id ON sessions
    DEFERRABLE INITIALLY DEFERRED FOR EACH ROW
    EXECUTE FUNCTION fact_changed('id');

DO $$
DECLARE
    t TEXT;
BEGIN
    FOREACH t IN ARRAY ARRAY['agent_groups', 'agent_destinations', 'agent_message_policies', 'container_configs',
                             'action_settings', 'sessions'] LOOP
        EXECUTE format('CREATE TRIGGER fact_truncated AFTER TRUNCATE ON %I FOR EACH STATEMENT EXECUTE FUNCTION fact_truncated()', t);
        EXECUTE format('ALTER TABLE %I ENABLE ALWAYS TRIGGER fact_changed, ENABLE ALWAYS TRIGGER fact_truncated', t);
    END LOOP;
END $$;
