#!/bin/bash
# PostgreSQL from Debian's packages with the official image's contract: on first start (empty
# $PGDATA) create the cluster, the POSTGRES_USER role with POSTGRES_PASSWORD and the POSTGRES_DB
# database; then run the server in the foreground. POSTGRES_LISTEN (default '*') and POSTGRES_PORT
# (default 5432) say where it listens.
set -euo pipefail
: "${POSTGRES_USER:=postgres}" "${POSTGRES_DB:=$POSTGRES_USER}" "${POSTGRES_LISTEN:=*}" "${POSTGRES_PORT:=5432}"
if [[ -z "${POSTGRES_PASSWORD:-}" ]]; then
    echo "postgres-entrypoint: POSTGRES_PASSWORD is empty; set it (see .env in docs/deployment.md)" >&2
    exit 1
fi
if [[ ! -s "$PGDATA/PG_VERSION" ]]; then
    pwfile="$(mktemp)"
    printf '%s\n' "$POSTGRES_PASSWORD" >"$pwfile"
    initdb --pgdata="$PGDATA" --username="$POSTGRES_USER" --pwfile="$pwfile" --auth-local=trust --auth-host=scram-sha-256 >/dev/null
    rm -f "$pwfile"
    printf 'host all all all scram-sha-256\n' >>"$PGDATA/pg_hba.conf"
    pg_ctl --pgdata="$PGDATA" --options="-c listen_addresses='' -c unix_socket_directories=/run/postgresql" --wait start >/dev/null
    if [[ "$POSTGRES_DB" != postgres ]]; then
        createdb --host=/run/postgresql --username="$POSTGRES_USER" "$POSTGRES_DB"
    fi
    pg_ctl --pgdata="$PGDATA" --mode=fast --wait stop >/dev/null
    echo "postgres-entrypoint: created the cluster, role $POSTGRES_USER and database $POSTGRES_DB"
fi
# the compose file's command (the official image's convention: `postgres -c key=value ...`) adds its settings
if [[ "${1:-}" == postgres ]]; then shift; fi
exec postgres -D "$PGDATA" -c "listen_addresses=$POSTGRES_LISTEN" -c "port=$POSTGRES_PORT" \
    -c unix_socket_directories=/run/postgresql "$@"
