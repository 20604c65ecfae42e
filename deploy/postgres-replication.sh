#!/bin/sh
# Run once by the postgres image on a new data volume (docker-entrypoint-initdb.d): lets db-replica's
# pg_basebackup and its WAL receiver connect for replication with the database user's password. An existing
# volume needs the same line added to its pg_hba.conf, then a reload.
set -e
echo "host replication all all scram-sha-256" >> "$PGDATA/pg_hba.conf"
