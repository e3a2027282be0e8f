#!/bin/sh
# First start of the primary (docker-entrypoint-initdb.d): a role for the
# standby to stream as, the server's role allowed to read the replication
# state (its clawguard_database_* gauges and /readyz?verbose), and the
# standby named synchronous once the real server starts — set here, not on the
# command line, so this first start's own commits do not wait for a standby
# that does not exist yet.
set -e
psql -v ON_ERROR_STOP=1 -U "$POSTGRES_USER" -d "$POSTGRES_DB" <<'SQL'
CREATE ROLE replicator WITH REPLICATION LOGIN PASSWORD 'replicator';
GRANT pg_monitor TO clawguard;
ALTER SYSTEM SET synchronous_standby_names = 'standby1';
SQL
echo "host replication replicator all scram-sha-256" >> "$PGDATA/pg_hba.conf"
