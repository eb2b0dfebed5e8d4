# Sourced by the scripts that start the tests' servers (pg.sh, aws.sh,
# rest.sh, s3s.sh): which port on 127.0.0.1 a new server takes.
#
# Linux gives outgoing connections their local port from
# net.ipv4.ip_local_port_range (32768-60999 unless changed), and the suite
# opens thousands of them to its own servers. A server whose port lies in
# that range can find it held by one of them at the moment it starts
# ("could not bind ... Address already in use"), though nothing listens
# there a second later. So a server starts on its default port only when
# that lies outside the range (read now: a machine may have narrowed it),
# else on the next free port outside it; a start that still meets "address
# in use" (another program took it meanwhile) tries the next one. Each
# script prints the address it ended up on, which is all its callers use,
# and keeps it in its own state, so the next caller finds the same server.

# The range's ends; the kernel's default where /proc does not say.
if ! read -r port_range_lo port_range_hi </proc/sys/net/ipv4/ip_local_port_range 2>/dev/null; then
  port_range_lo=32768 port_range_hi=60999
fi
# Ports a start of this script met in use: never picked again by it.
ports_taken=()

# Whether something accepts connections on the port. A connect is the one
# probe every machine has; a port only an outgoing connection holds passes
# it, which outside the ephemeral range does not happen.
port_listening() {
  (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null
}

port_ephemeral() {
  [ "$1" -ge "$port_range_lo" ] && [ "$1" -le "$port_range_hi" ]
}

port_usable() {
  local p
  for p in "${ports_taken[@]}"; do
    [ "$p" != "$1" ] || return 1
  done
  ! port_listening "$1"
}

# port_pick WANT: prints the port a new server takes, WANT itself when it is
# outside the ephemeral range and free; says on stderr why not otherwise.
port_pick() {
  local want="$1" me="${0##*/}"
  if ! port_ephemeral "$want" && port_usable "$want"; then
    echo "$want"
    return
  fi
  # The ports outside the range, 1024 and up (below are the well-known
  # ones), as one circular sequence: those above the range (few services
  # live up there), then those below it. The search starts just after WANT
  # when it lies outside (so the port stays near the one asked for), else
  # at a place among the ports above that WANT decides, so servers that all
  # want ports in the range do not all try the same ones first.
  local above=$((65535 - port_range_hi)) below=$((port_range_lo - 1024))
  [ "$above" -gt 0 ] || above=0
  [ "$below" -gt 0 ] || below=0
  local n=$((above + below)) start i j p
  if [ "$want" -gt "$port_range_hi" ]; then
    start=$((want - port_range_hi))
  elif [ "$want" -lt "$port_range_lo" ] && [ "$want" -ge 1024 ]; then
    start=$((above + want - 1024 + 1))
  elif [ "$above" -gt 0 ]; then
    start=$((want % above))
  else
    start=$((n > 0 ? want % n : 0))
  fi
  for ((j = 0; j < n; j++)); do
    i=$(((start + j) % n))
    if [ "$i" -lt "$above" ]; then p=$((port_range_hi + 1 + i)); else p=$((1024 + i - above)); fi
    if port_usable "$p"; then
      if port_ephemeral "$want"; then
        echo "$me: port $want lies in the kernel's ephemeral port range ($port_range_lo-$port_range_hi), where the suite's own connections may hold it; using $p" >&2
      else
        echo "$me: port $want is in use; using $p" >&2
      fi
      echo "$p"
      return
    fi
  done
  # The range leaves no free port outside it: one inside, which may still
  # meet "address in use"; the caller's retry covers that.
  for ((j = 0; j < 1000; j++)); do
    p=$((port_range_lo + (RANDOM * 32768 + RANDOM) % (port_range_hi - port_range_lo + 1)))
    if [ "$p" -ge 1024 ] && port_usable "$p"; then
      echo "$me: no free port outside the kernel's ephemeral port range ($port_range_lo-$port_range_hi); using $p inside it" >&2
      echo "$p"
      return
    fi
  done
  echo "$me: no free port found on 127.0.0.1" >&2
  return 1
}

# Whether a log says the server could not bind its port.
port_clash() {
  grep -qiE 'address (already )?in use' "$@" 2>/dev/null
}

# server_alive PIDFILE WORD: whether the process a pid file names still runs
# and is the server (WORD in its command line). A pid file in /tmp can
# outlive its server, and after a reboot its pid may be a stranger's.
server_alive() {
  local pid
  pid="$(cat "$1" 2>/dev/null)" && [ -n "$pid" ] || return 1
  tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -qF -- "$2"
}

# port_start NAME STATE WANT LAUNCH: starts a server on a port of 127.0.0.1
# (WANT when port_pick allows) and prints the port once something listens
# there, recording it in STATE.port and the pid in STATE.pid. LAUNCH PORT
# starts the server in the background with its output in STATE.log, not
# inheriting the caller's lock on fd 9. A start that meets "address in use"
# (taken between the pick and the bind) tries another port, 5 times at most.
port_start() {
  local name="$1" state="$2" want="$3" launch="$4" port pid attempt
  port="$(port_pick "$want")" || return 1
  for attempt in 1 2 3 4 5; do
    echo "starting $name on 127.0.0.1:$port (log: $state.log)" >&2
    "$launch" "$port"
    pid=$!
    echo "$pid" >"$state.pid"
    for _ in $(seq 1 100); do
      if port_listening "$port" || ! kill -0 "$pid" 2>/dev/null || port_clash "$state.log"; then break; fi
      sleep 0.1
    done
    if kill -0 "$pid" 2>/dev/null && port_listening "$port"; then
      echo "$port" >"$state.port"
      echo "$port"
      return 0
    fi
    if [ "$attempt" -lt 5 ] && port_clash "$state.log"; then
      echo "${0##*/}: port $port was taken as $name started; trying another" >&2
      kill "$pid" 2>/dev/null || true
      ports_taken+=("$port")
      port="$(port_pick "$want")" || return 1
      continue
    fi
    break
  done
  echo "$name did not start on 127.0.0.1:$port; see $state.log" >&2
  tail -n 20 "$state.log" >&2 || true
  return 1
}
