#!/usr/bin/env bash
# Starts (or reuses) a throwaway Postgres cluster for floe's Postgres source
# tests and prints its conninfo on stdout; everything else goes to stderr.
#
#   FLOE_PG_PORT         port on 127.0.0.1 (default 15432; see below)
#   FLOE_PG_DATA         data directory (default $HOME/.cache/floe-pg/<FLOE_PG_PORT>)
#   FLOE_PG_INITDB_OPTS  extra initdb options for a new cluster (e.g. --wal-segsize=1)
#   FLOE_PG_OPTS         extra server options (`-c name=value …`)
#   FLOE_PG_HBA          a pg_hba.conf to install before the server starts
#
# The cluster trusts every local connection: it is for tests only and listens
# on 127.0.0.1 alone. Logical decoding needs wal_level=logical and slots.
#
# The data directory is the cluster: a running one is reused on whatever
# port it listens. A new start takes FLOE_PG_PORT when that lies outside the
# kernel's ephemeral port range and is free, else another port
# (local-dev/ports.sh says why); the conninfo printed names the port.
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
want="${FLOE_PG_PORT:-15432}"
data="${FLOE_PG_DATA:-$HOME/.cache/floe-pg/$want}"
# shellcheck source=local-dev/ports.sh
. "$here/ports.sh"

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

conninfo() {
  echo "host=127.0.0.1 port=$1 user=postgres dbname=postgres"
}

# Concurrent callers (parallel test binaries) start one cluster between them,
# and none of them reads a half-written postmaster.pid.
mkdir -p "$(dirname "$data")"
exec 9>"$data.lock"
flock 9

# The port of this directory's postmaster, when one runs: the fourth line of
# its postmaster.pid. The pid there may be a stranger's after a reboot (pids
# are reused, the file stays), so the process must also have the data
# directory as its working directory, as a postmaster does.
running_port() {
  local pid port
  pid="$(sed -n 1p "$data/postmaster.pid" 2>/dev/null)" || return 1
  port="$(sed -n 4p "$data/postmaster.pid" 2>/dev/null)" || return 1
  [ -n "$pid" ] && [ -n "$port" ] || return 1
  [ "$(readlink "/proc/$pid/cwd" 2>/dev/null)" = "$(cd "$data" && pwd -P)" ] || return 1
  echo "$port"
}

if port="$(running_port)"; then
  # It may still be starting (or recovering after a crash).
  for _ in $(seq 1 60); do
    if "$bin/pg_isready" -q -h 127.0.0.1 -p "$port"; then
      conninfo "$port"
      exit 0
    fi
    sleep 1
  done
  echo "pg.sh: the cluster in $data (port $port) runs but does not answer; see $data/server.log" >&2
  exit 1
fi

# What an earlier run may have left that would stop this start: the lock
# files of a postmaster that is gone (Postgres takes a live stranger holding
# their pid for another postmaster and refuses to start), a directory an
# interrupted initdb left without PG_VERSION, and a cluster an older major
# version made (moved aside, not deleted: FLOE_PG_DATA may name one someone
# wants back).
if [ -e "$data/postmaster.pid" ]; then
  echo "pg.sh: removing the stale postmaster.pid of a cluster no longer running in $data" >&2
  rm -f "$data/postmaster.pid"
fi
rm -f "$data"/.s.PGSQL.*
major="$("$bin/postgres" -V | sed -E 's/^[^0-9]*([0-9]+).*/\1/')"
if [ -d "$data" ] && [ "$(cat "$data/PG_VERSION" 2>/dev/null)" != "$major" ]; then
  if [ -z "$(ls -A "$data")" ]; then
    rmdir "$data"
  else
    aside="$data.stale-$(date +%Y%m%d%H%M%S)"
    echo "pg.sh: $data holds no Postgres $major cluster (PG_VERSION: $(cat "$data/PG_VERSION" 2>/dev/null || echo none)); moved to $aside, a new cluster takes its place" >&2
    mv "$data" "$aside"
  fi
fi

if [ ! -d "$data" ]; then
  # Made beside its place and moved in once complete, so an interrupted
  # initdb never leaves a directory that looks like a cluster.
  new="$data.initdb"
  rm -rf "$new"
  mkdir -p "$new"
  if [ "$(id -u)" = 0 ]; then
    # The parent must be traversable by the postgres user.
    chown postgres "$new"
    chmod 700 "$new"
    d="$(dirname "$new")"
    while [ "$d" != / ]; do
      chmod o+x "$d" 2>/dev/null || true
      d="$(dirname "$d")"
    done
  fi
  # shellcheck disable=SC2086 # FLOE_PG_INITDB_OPTS is a list of options
  as_pg "$bin/initdb" -D "$new" -U postgres --auth=trust -E UTF8 --locale=C.UTF-8 ${FLOE_PG_INITDB_OPTS:-} >&2 \
    || as_pg "$bin/initdb" -D "$new" -U postgres --auth=trust -E UTF8 ${FLOE_PG_INITDB_OPTS:-} >&2
  mv -T "$new" "$data"
fi
if [ -n "${FLOE_PG_HBA:-}" ]; then
  cp "$FLOE_PG_HBA" "$data/pg_hba.conf"
  if [ "$(id -u)" = 0 ]; then chown postgres "$data/pg_hba.conf"; fi
fi

# Settings on the command line win over postgresql.conf, so a reused data
# directory gets them too. The server outlives this script: it must not keep a
# caller's descriptors (rest.sh and aws.sh hold their lock on fd 9, and so
# does this script), or the next caller would wait on that lock for as long
# as Postgres runs.
port="$(port_pick "$want")"
for attempt in 1 2 3 4 5; do
  log_start="$(stat -c %s "$data/server.log" 2>/dev/null || echo 0)"
  if as_pg "$bin/pg_ctl" -D "$data" -l "$data/server.log" -w -t 60 start -o "\
 -c listen_addresses=127.0.0.1 -c port=$port -c unix_socket_directories=$data\
 -c wal_level=logical -c max_replication_slots=64 -c max_wal_senders=16\
 -c max_connections=200 -c fsync=off\
 -c full_page_writes=off ${FLOE_PG_OPTS:-}" >&2 3>&- 4>&- 5>&- 6>&- 7>&- 8>&- 9>&-; then
    conninfo "$port"
    exit 0
  fi
  # Free when picked, taken before Postgres bound it: another one.
  if [ "$attempt" -lt 5 ] && tail -c +"$((log_start + 1))" "$data/server.log" | port_clash; then
    echo "pg.sh: port $port was taken as the cluster started; trying another" >&2
    ports_taken+=("$port")
    port="$(port_pick "$want")"
    continue
  fi
  tail -n 30 "$data/server.log" >&2 || true
  exit 1
done
