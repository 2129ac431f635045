#!/bin/sh
# The Compose files' PostgreSQL, at its first start (/docker-entrypoint-initdb.d: run once
# after initdb, as the postgres user, by the official image's entrypoint and by the
# project's scripts/pg-entrypoint.sh alike, while a temporary server listens on the Unix
# socket only):
#
#   1. TLS: a private key and a self-signed certificate, made here, in this container, by
#      openssl (no network), in the data directory (the key 0600), and ssl = on. Nothing
#      outside the container holds the key; it is new for every new data volume.
#   2. The bridge's role, pgimageai_bridge: LOGIN REPLICATION and nothing more (not a
#      superuser, no CREATEROLE, no CREATEDB), its password from PGIMAGEAI_BRIDGE_PASSWORD.
#      Its grants need pgimageai's tables, so they come after migrate: bridge-grants.sql,
#      the least-privilege block of docs/operations.md.
#   3. pg_hba.conf: the bridge's role is refused over TCP without TLS (first match wins,
#      so these lines go first).
#
# Checked by deploy/compose_test.go; integration/compose_test.go starts compose.offline.yaml
# and checks the bridge's sessions (role, TLS) in pg_stat_activity and pg_stat_ssl.
set -eu

openssl req -new -x509 -days 3650 -nodes -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 \
	-subj "/CN=postgres" -addext "subjectAltName=DNS:postgres,DNS:localhost,IP:127.0.0.1" \
	-keyout "$PGDATA/server.key" -out "$PGDATA/server.crt" 2>/dev/null
chmod 600 "$PGDATA/server.key"
printf '\n# compose: TLS (deploy/compose/initdb/pgimageai.sh)\nssl = on\n' >>"$PGDATA/postgresql.conf"

{
	printf '# compose: the bridge only over TLS (deploy/compose/initdb/pgimageai.sh)\n'
	printf 'hostnossl all pgimageai_bridge all reject\n'
	printf 'hostnossl replication pgimageai_bridge all reject\n'
	cat "$PGDATA/pg_hba.conf"
} >"$PGDATA/pg_hba.conf.new"
mv "$PGDATA/pg_hba.conf.new" "$PGDATA/pg_hba.conf"

# The password reaches the server from the environment (\getenv), never from argv.
psql -v ON_ERROR_STOP=1 --no-psqlrc --username="${POSTGRES_USER:-postgres}" --dbname="${POSTGRES_DB:-postgres}" <<'SQL'
\getenv pw PGIMAGEAI_BRIDGE_PASSWORD
SELECT CASE WHEN coalesce(:'pw', '') = '' THEN 'PGIMAGEAI_BRIDGE_PASSWORD is empty' END AS error \gset
\if :{?error}
\echo :error
SELECT 1/0; -- stops the init (ON_ERROR_STOP)
\endif
CREATE ROLE pgimageai_bridge LOGIN REPLICATION NOSUPERUSER NOCREATEROLE NOCREATEDB PASSWORD :'pw';
SQL
