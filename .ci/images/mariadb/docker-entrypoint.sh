#!/bin/sh
# docker-entrypoint.sh of the MariaDB stand-in image: `mariadbd [options]` runs the
# server (as user mysql, listening on every address); anything else runs as given.
set -e
case "$1" in
mariadbd | mysqld)
  shift
  exec mariadbd --user=mysql --bind-address=0.0.0.0 --skip-name-resolve "$@"
  ;;
esac
exec "$@"
