-- Freeze (issue 32): from its commit on, every decision an agent asks in its
-- scope (every agent, a group's, or a runner's) denies, on every replica:
-- the table is a fact of every catalog entry, read by lookup key and
-- mirrored in the replicas' snapshots, so it has the fact_changed triggers
-- of 0200 and a decision is never answered from a copy older than the
-- freeze. Unfreezing deletes the row.
CREATE TABLE freezes (
    scope     TEXT NOT NULL CHECK (scope IN ('all', 'group', 'runner')),
    target    TEXT NOT NULL DEFAULT '' CHECK ((scope = 'all') = (target = '')),
    reason    TEXT NOT NULL DEFAULT '',
    frozen_by TEXT NOT NULL,
    frozen_at TIMESTAMPTZ NOT NULL DEFAULT now(),
    PRIMARY KEY (scope, target)
);

CREATE CONSTRAINT TRIGGER fact_changed
    AFTER INSERT OR DELETE OR UPDATE OF scope, target, reason, frozen_by, frozen_at
    ON freezes
    DEFERRABLE INITIALLY DEFERRED FOR EACH ROW
    EXECUTE FUNCTION fact_changed('scope', 'target');
CREATE TRIGGER fact_truncated AFTER TRUNCATE ON freezes FOR EACH STATEMENT EXECUTE FUNCTION fact_truncated();
ALTER TABLE freezes ENABLE ALWAYS TRIGGER fact_changed, ENABLE ALWAYS TRIGGER fact_truncated;
