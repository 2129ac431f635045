#!/bin/bash
# pg-entrypoint.sh is the entrypoint of the pgimageai-postgres:17 test image built by
# scripts/build-test-image.sh. It implements the subset of the official postgres image's
# docker-entrypoint.sh that pgimageai relies on:
#
#   POSTGRES_PASSWORD          superuser password (required unless POSTGRES_HOST_AUTH_METHOD=trust)
#   POSTGRES_USER              superuser name (default postgres)
#   POSTGRES_DB                database created at init (default $POSTGRES_USER)
#   POSTGRES_HOST_AUTH_METHOD  auth method for host connections (default scram-sha-256)
#   POSTGRES_INITDB_ARGS       extra initdb arguments (word-split)
#   PGDATA                     data directory (default /var/lib/postgresql/data)
#   /docker-entrypoint-initdb.d/*.sql and *.sh run once, after initdb
#
# "docker run IMAGE -c wal_level=logical" runs "postgres -c wal_level=logical", as the
# official image does. As root it prepares the directories and re-executes itself as the
# postgres user (setpriv; the image has no gosu).
set -Eeuo pipefail

export PGDATA="${PGDATA:-/var/lib/postgresql/data}"
export POSTGRES_USER="${POSTGRES_USER:-postgres}"
export POSTGRES_DB="${POSTGRES_DB:-$POSTGRES_USER}"

log() { printf '%s pg-entrypoint: %s\n' "$(date -u '+%Y-%m-%d %H:%M:%S UTC')" "$*" >&2; }

if [ "$#" -eq 0 ] || [ "${1:0:1}" = '-' ]; then
	set -- postgres "$@"
fi
if [ "$1" != postgres ]; then
	exec "$@"
fi

if [ "$(id -u)" = 0 ]; then
	mkdir -p "$PGDATA" /var/run/postgresql
	chown postgres:postgres "$PGDATA" /var/run/postgresql
	chmod 700 "$PGDATA"
	chmod 3777 /var/run/postgresql
	HOME=/var/lib/postgresql exec setpriv --reuid=postgres --regid=postgres --init-groups "${BASH_SOURCE[0]}" "$@"
fi

# run_initdb AUTH [ARG...] runs initdb with the superuser, the host auth method AUTH,
# ARGs and POSTGRES_INITDB_ARGS.
run_initdb() {
	local auth="$1"
	shift
	# shellcheck disable=SC2086 # POSTGRES_INITDB_ARGS is word-split on purpose, like upstream.
	initdb --username="$POSTGRES_USER" --auth-local=trust --auth-host="$auth" "$@" ${POSTGRES_INITDB_ARGS:-}
}

# init_cluster runs initdb, opens host and replication connections from all addresses,
# then runs the init scripts against a temporary server that listens on the Unix socket
# only — so a successful TCP connection always means the final server is up.
init_cluster() {
	local auth="${POSTGRES_HOST_AUTH_METHOD:-scram-sha-256}"
	if [ -z "${POSTGRES_PASSWORD:-}" ] && [ "$auth" != trust ]; then
		log 'error: database is uninitialized and POSTGRES_PASSWORD is not set'
		log 'set POSTGRES_PASSWORD (or POSTGRES_HOST_AUTH_METHOD=trust, never in production)'
		exit 1
	fi
	# The password reaches initdb through a pipe, never argv or a file. The process
	# substitution must be an argument of the call itself: its fd closes right after it.
	if [ -n "${POSTGRES_PASSWORD:-}" ]; then
		run_initdb "$auth" --pwfile=<(printf '%s\n' "$POSTGRES_PASSWORD")
	else
		run_initdb "$auth"
	fi

	printf '\n# pg-entrypoint.sh\nhost all all all %s\nhost replication all all %s\n' \
		"$auth" "$auth" >>"$PGDATA/pg_hba.conf"
	printf "\n# pg-entrypoint.sh\nlisten_addresses = '*'\n" >>"$PGDATA/postgresql.conf"

	pg_ctl -D "$PGDATA" -o "-c listen_addresses=''" -w start
	local -a psql=(psql -v ON_ERROR_STOP=1 --no-psqlrc --username="$POSTGRES_USER" --no-password)
	if [ "$POSTGRES_DB" != postgres ]; then
		"${psql[@]}" --dbname=postgres --set=db="$POSTGRES_DB" <<<'CREATE DATABASE :"db";'
	fi
	local f
	shopt -s nullglob
	# shellcheck source=/dev/null # init scripts are sourced, like upstream
	for f in /docker-entrypoint-initdb.d/*; do
		case "$f" in
		*.sh) log "running $f" && . "$f" ;;
		*.sql) log "running $f" && "${psql[@]}" --dbname="$POSTGRES_DB" -f "$f" ;;
		*) log "ignoring $f" ;;
		esac
	done
	pg_ctl -D "$PGDATA" -m fast -w stop
	log 'init complete; starting the server'
}

if [ ! -s "$PGDATA/PG_VERSION" ]; then
	init_cluster
fi
exec "$@"
