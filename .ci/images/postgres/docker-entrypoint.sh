#!/bin/sh
# docker-entrypoint.sh of the PostgreSQL stand-in image: `postgres [options]` runs the
# server (as user postgres, listening on every address); anything else runs as given.
#
# Like the official image, POSTGRES_USER (other than postgres) names a superuser to
# create, with POSTGRES_PASSWORD, and POSTGRES_DB (default: that user's name) a
# database it owns; this runs once per data directory, in single-user mode before the
# server starts. Every host is trusted (pg_hba.conf), so passwords are not checked.
set -e
PG=/usr/lib/postgresql/15/bin
DATA=/var/lib/postgresql/15/main
CONF=/etc/postgresql/15/main/postgresql.conf
sq() { printf '%s' "$1" | sed "s/'/''/g"; }  # inside '…' in SQL
dq() { printf '%s' "$1" | sed 's/"/""/g'; }  # inside "…" in SQL
as_postgres() { setpriv --reuid=postgres --regid=postgres --init-groups "$@"; }
init_user() {
  user=${POSTGRES_USER:-postgres}
  db=${POSTGRES_DB:-$user}
  done_file="$DATA/docker-init-done"
  [ "$user" != postgres ] && [ ! -e "$done_file" ] || return 0
  printf '%s\n' \
    "CREATE ROLE \"$(dq "$user")\" SUPERUSER LOGIN PASSWORD '$(sq "${POSTGRES_PASSWORD:-}")';" \
    "CREATE DATABASE \"$(dq "$db")\" OWNER \"$(dq "$user")\";" |
    as_postgres "$PG/postgres" --single -D "$DATA" -c config_file="$CONF" postgres >/dev/null
  touch "$done_file"
}
if [ "$1" = postgres ]; then
  shift
  install -d -o postgres -g postgres -m 2775 /run/postgresql
  init_user
  # setpriv execs the server (runuser would stay as its parent and not pass on
  # the signals that stop it).
  exec setpriv --reuid=postgres --regid=postgres --init-groups \
    "$PG/postgres" -D "$DATA" -c config_file="$CONF" -c listen_addresses='*' "$@"
fi
exec "$@"
