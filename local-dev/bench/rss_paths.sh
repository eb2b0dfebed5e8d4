#!/usr/bin/env bash
# Peak RSS of every path (CLI ingest, floe serve, and each Lambda function
# as its own process on a Runtime API stand-in, on moto's S3, SQS and Glue)
# for the three record shapes, at the worst case the defaults allow. The
# method is local-dev/bench/rss_paths.py's docstring; the table is in
# docs/benchmarks.md, "Writer memory: batches bounded by bytes".
#
#   local-dev/bench/rss_paths.sh                    # everything (release builds first)
#   local-dev/bench/rss_paths.sh --paths writer,http --shapes github
#   FLOE_BIN=… FLOE_FN_DIR=… local-dev/bench/rss_paths.sh --scale 0.2
#
# FLOE_BIN: the floe binary; FLOE_FN_DIR: the directory of the functions'
# binaries (floe-writer, floe-committer, floe-ingest-http, floe-maintenance).
# Unset: this checkout's release build of both, built first.
# FLOE_BEFORE_FN_DIR (and FLOE_BEFORE_BIN): an earlier build, each path
# measured by it first and then by this one, in one run.
set -euo pipefail
cd "$(dirname "$0")/../.."
# One cargo run for both, so floe-core is compiled once with one set of features.
if [ -z "${FLOE_BIN:-}" ] || [ -z "${FLOE_FN_DIR:-}" ]; then
  cargo build --release --locked -p floe-cli --features floe-cli/full -p floe-writer \
    -p floe-committer -p floe-ingest-http -p floe-maintenance >/dev/null
fi
floe="${FLOE_BIN:-${CARGO_TARGET_DIR:-target}/release/floe}"
fn_dir="${FLOE_FN_DIR:-${CARGO_TARGET_DIR:-target}/release}"
venv="${FLOE_VENV:-$HOME/.cache/floe-venv}"
endpoint="$(local-dev/aws.sh)"
dir="$(mktemp -d)"
trap 'rm -rf "$dir"' EXIT
export AWS_ACCESS_KEY_ID=test AWS_SECRET_ACCESS_KEY=test AWS_REGION=us-east-1
echo "rss_paths: commit $(git rev-parse --short HEAD), $(date -u '+%Y-%m-%d %H:%M') UTC, load $(cut -d' ' -f1-3 /proc/loadavg)" >&2
before=()
if [ -n "${FLOE_BEFORE_FN_DIR:-}" ]; then
  before=(--before-bin-dir "$FLOE_BEFORE_FN_DIR" --before-floe "${FLOE_BEFORE_BIN:-$floe}")
fi
"$venv/bin/python" local-dev/bench/rss_paths.py --floe "$floe" --bin-dir "$fn_dir" \
  --endpoint "$endpoint" --dir "$dir" "${before[@]}" "$@"
