#!/bin/sh
# The standby: on its first start, a base backup of the primary that follows
# it as "standby1" (pg_basebackup -R writes primary_conninfo and
# standby.signal); then Postgres, streaming. Promote it with
#   docker compose exec postgres-standby pg_ctl promote -D /var/lib/postgresql/data
set -e
if [ ! -s "$PGDATA/PG_VERSION" ]; then
  until pg_basebackup -d "host=postgres user=replicator password=replicator application_name=standby1" \
      -D "$PGDATA" -R -X stream -c fast; do
    echo "standby: waiting for the primary" >&2
    sleep 1
  done
  # The primary's synchronous_standby_names came with the backup: once
  # promoted, this node has no standby of its own to wait for (add one and
  # name it here again).
  echo "synchronous_standby_names = ''" >> "$PGDATA/postgresql.auto.conf"
  chmod 0700 "$PGDATA"
fi
exec postgres
