#!/bin/sh
# docker-entrypoint.sh of the MariaDB stand-in image: `mariadbd [options]` runs the
# server (as user mysql, listening on every address); anything else runs as given.
#
# Like the official image, MYSQL_DATABASE (or MARIADB_DATABASE) names a database to
# create, and MYSQL_USER with MYSQL_PASSWORD (or the MARIADB_ forms) a user from any
# host with every right on it; the server runs this at each start (--init-file), and
# it changes nothing the second time. root keeps an empty password from any host.
set -e
sq() { printf '%s' "$1" | sed "s/'/''/g"; }  # inside '…' in SQL
# shellcheck disable=SC2016 # the backquotes are SQL, not a command
bq() { printf '%s' "$1" | sed 's/`/``/g'; }  # inside `…` in SQL
init_file() {
  db=${MARIADB_DATABASE:-${MYSQL_DATABASE:-}}
  user=${MARIADB_USER:-${MYSQL_USER:-}}
  pass=${MARIADB_PASSWORD:-${MYSQL_PASSWORD:-}}
  [ -n "$db$user" ] || return 0
  f=/run/mysqld/docker-init.sql
  : >"$f"
  [ -z "$db" ] || echo "CREATE DATABASE IF NOT EXISTS \`$(bq "$db")\`;" >>"$f"
  if [ -n "$user" ]; then
    echo "CREATE USER IF NOT EXISTS '$(sq "$user")'@'%' IDENTIFIED BY '$(sq "$pass")';" >>"$f"
    [ -z "$db" ] || echo "GRANT ALL ON \`$(bq "$db")\`.* TO '$(sq "$user")'@'%';" >>"$f"
  fi
  chown mysql:mysql "$f"
  chmod 0600 "$f"
  echo "--init-file=$f"
}
case "$1" in
mariadbd | mysqld)
  shift
  init=$(init_file)
  # shellcheck disable=SC2086 # $init is one option or none
  exec mariadbd --user=mysql --bind-address=0.0.0.0 --skip-name-resolve $init "$@"
  ;;
esac
exec "$@"
