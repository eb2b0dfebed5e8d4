#!/usr/bin/env bash
# Starts (or reuses) a throwaway Postgres cluster for floe's Postgres source
# tests and prints its conninfo on stdout; everything else goes to stderr.
#
#   FLOE_PG_PORT         port on 127.0.0.1 (default 54329)
#   FLOE_PG_DATA         data directory (default $HOME/.cache/floe-pg/<port>)
#   FLOE_PG_INITDB_OPTS  extra initdb options for a new cluster (e.g. --wal-segsize=1)
#   FLOE_PG_OPTS         extra server options (`-c name=value …`)
#   FLOE_PG_HBA          a pg_hba.conf to install before the server starts
#
# The cluster trusts every local connection: it is for tests only and listens
# on 127.0.0.1 alone. Logical decoding needs wal_level=logical and slots.
set -euo pipefail

port="${FLOE_PG_PORT:-54329}"
data="${FLOE_PG_DATA:-$HOME/.cache/floe-pg/$port}"
conninfo="host=127.0.0.1 port=$port user=postgres dbname=postgres"

find_bin() {
  local d
  for d in /usr/lib/postgresql/*/bin; do
    if [ -x "$d/initdb" ]; then
      echo "$d"
    fi
  done | sort -V | tail -n 1
}

bin="$(find_bin)"
if [ -z "$bin" ]; then
  # A fresh CI machine has no Postgres: Debian's package brings the binaries
  # (its own cluster is not used).
  echo "pg.sh: installing postgresql" >&2
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq >&2
  apt-get install -y -qq postgresql >&2
  bin="$(find_bin)"
fi
if [ -z "$bin" ]; then
  echo "pg.sh: no initdb found under /usr/lib/postgresql/*/bin" >&2
  exit 1
fi

# initdb and postgres refuse to run as root.
as_pg() {
  if [ "$(id -u)" = 0 ]; then
    runuser -u postgres -- "$@"
  else
    "$@"
  fi
}

if "$bin/pg_isready" -q -h 127.0.0.1 -p "$port"; then
  echo "$conninfo"
  exit 0
fi

mkdir -p "$data"
if [ "$(id -u)" = 0 ]; then
  # The parent must be traversable by the postgres user.
  chown postgres "$data"
  chmod 700 "$data"
  d="$(dirname "$data")"
  while [ "$d" != / ]; do
    chmod o+x "$d" 2>/dev/null || true
    d="$(dirname "$d")"
  done
fi

if [ ! -f "$data/PG_VERSION" ]; then
  # shellcheck disable=SC2086 # FLOE_PG_INITDB_OPTS is a list of options
  as_pg "$bin/initdb" -D "$data" -U postgres --auth=trust -E UTF8 --locale=C.UTF-8 ${FLOE_PG_INITDB_OPTS:-} >&2 \
    || as_pg "$bin/initdb" -D "$data" -U postgres --auth=trust -E UTF8 ${FLOE_PG_INITDB_OPTS:-} >&2
fi
if [ -n "${FLOE_PG_HBA:-}" ]; then
  cp "$FLOE_PG_HBA" "$data/pg_hba.conf"
  if [ "$(id -u)" = 0 ]; then chown postgres "$data/pg_hba.conf"; fi
fi

# Settings on the command line win over postgresql.conf, so a reused data
# directory gets them too. The server outlives this script: it must not keep a
# caller's descriptors (rest.sh and aws.sh hold their lock on fd 9), or the
# next caller would wait on that lock for as long as Postgres runs.
as_pg "$bin/pg_ctl" -D "$data" -l "$data/server.log" -w -t 60 start -o "\
 -c listen_addresses=127.0.0.1 -c port=$port -c unix_socket_directories=$data\
 -c wal_level=logical -c max_replication_slots=64 -c max_wal_senders=16\
 -c max_connections=200 -c fsync=off\
 -c full_page_writes=off ${FLOE_PG_OPTS:-}" >&2 3>&- 4>&- 5>&- 6>&- 7>&- 8>&- 9>&- || {
  # Another caller may have started it at the same moment.
  if ! "$bin/pg_isready" -q -h 127.0.0.1 -p "$port"; then
    tail -n 30 "$data/server.log" >&2 || true
    exit 1
  fi
}

echo "$conninfo"
