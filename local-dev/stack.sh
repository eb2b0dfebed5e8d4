#!/usr/bin/env bash
# The local stack in one command: moto for S3, SQS and Glue (started by
# local-dev/aws.sh, installed into a venv on first use), then `floe local`
# on it: bucket, queues and Glue database created, the writer, committer,
# HTTP and maintenance functions running with emulated event sources.
# Stop it with Ctrl-C. Flags go to `floe local` (see `floe local --help`):
#
#   ./local-dev/stack.sh                 # HTTP on 127.0.0.1:8080, token "local"
#   ./local-dev/stack.sh --http 127.0.0.1:9000 --batching-window-ms 5000
#
# It builds floe exactly as the README's quick start does, so after
# `cargo run --release --bin floe -- demo` nothing is compiled again.
set -euo pipefail
cd "$(dirname "$0")/.."

endpoint="$(bash local-dev/aws.sh)"
# moto takes any credentials; the SDK wants some.
export AWS_ACCESS_KEY_ID="${AWS_ACCESS_KEY_ID:-testing}"
export AWS_SECRET_ACCESS_KEY="${AWS_SECRET_ACCESS_KEY:-testing}"
export AWS_EC2_METADATA_DISABLED=true

if [ -z "${FLOE_BIN:-}" ]; then
  cargo build --release --locked --bin floe
  FLOE_BIN="${CARGO_TARGET_DIR:-target}/release/floe"
fi
exec "$FLOE_BIN" local --endpoint "$endpoint" "$@"
