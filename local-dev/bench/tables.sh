#!/usr/bin/env bash
# docs/benchmarks.md, "Many tables: concurrent commits and shards": 100
# tables, 1,000 commit requests a second across them, a catalog whose
# commits take 320 ms (Glue) and 5 s (Unity); one committer committing a
# run's tables one after another (table concurrency 1: the committer before
# concurrent table commits), one committer with the default concurrency (8),
# then 2 and 4 shards of the commit queue. One JSON line per run.
# Usage: local-dev/bench/tables.sh [SECONDS] [DRAIN_SECONDS]   (default 50, 10:
# requests arrive for 50 s, the committers have 10 s more to finish)
set -euo pipefail
cd "$(dirname "$0")/../.."
seconds="${1:-50}"
drain="${2:-10}"
cargo build --release --locked --bin floe >/dev/null
floe="${CARGO_TARGET_DIR:-target}/release/floe"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

for latency in 320 5000; do
  for run in "1 1" "1 8" "2 8" "4 8"; do
    read -r shards concurrency <<<"$run"
    wh="$(mktemp -d -p "$work" wh.XXXXXX)"
    "$floe" --warehouse "$wh" bench tables --tables 100 --rate 1000 \
      --seconds "$seconds" --drain-seconds "$drain" --latency-ms "$latency" \
      --shards "$shards" --table-concurrency "$concurrency"
    rm -rf "$wh"
  done
done
