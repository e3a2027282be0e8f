-- A transaction may wake its listeners itself, after its commit, instead
-- of through these triggers' NOTIFY. A NOTIFY inside a transaction takes
-- pg_database's lock at commit and holds it through the commit's WAL
-- flush, so every durable transaction that notifies queues behind every
-- other one, cluster-wide. The hot approval transactions (a hold's
-- creation, a click) set clawguard.wake = 'after_commit' with their BEGIN
-- and send the same notifications once committed, from a statement that
-- writes nothing and so waits for no flush (server/internal/wake). Every
-- other writer is unchanged: the setting is unset and the trigger notifies.

CREATE OR REPLACE FUNCTION notify_hold_event() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF current_setting('clawguard.wake', true) IS DISTINCT FROM 'after_commit' THEN
        PERFORM pg_notify('clawguard_hold_events', NEW.cursor::text);
    END IF;
    RETURN NEW;
END;
$$;

CREATE OR REPLACE FUNCTION notify_runner_push() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.runner_id IS NOT NULL AND NEW.acked_at IS NULL
       AND current_setting('clawguard.wake', true) IS DISTINCT FROM 'after_commit' THEN
        PERFORM pg_notify('clawguard_runner_pushes', NEW.runner_id);
    END IF;
    RETURN NEW;
END;
$$;
