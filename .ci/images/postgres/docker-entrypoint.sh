#!/bin/sh
# docker-entrypoint.sh of the PostgreSQL stand-in image: `postgres [options]` runs the
# server (as user postgres, listening on every address); anything else runs as given.
set -e
if [ "$1" = postgres ]; then
  shift
  install -d -o postgres -g postgres -m 2775 /run/postgresql
  # setpriv execs the server (runuser would stay as its parent and not pass on
  # the signals that stop it).
  exec setpriv --reuid=postgres --regid=postgres --init-groups \
    /usr/lib/postgresql/15/bin/postgres \
    -D /var/lib/postgresql/15/main \
    -c config_file=/etc/postgresql/15/main/postgresql.conf \
    -c listen_addresses='*' "$@"
fi
exec "$@"
