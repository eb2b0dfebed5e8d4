#!/usr/bin/env bash
# The local stack in one command: moto for S3, SQS, Glue, Kinesis and
# DynamoDB (started by local-dev/aws.sh, installed into a venv on first
# use) and a Kafka-compatible broker (local-dev/kafka.sh), then `floe local`
# on them: bucket, queues, streams, topic and Glue database created, the
# writer, committer, HTTP and maintenance functions running with emulated
# event sources.
# Stop it with Ctrl-C. Flags go to `floe local` (see `floe local --help`):
#
#   ./local-dev/stack.sh                 # HTTP on 127.0.0.1:8080, token "local"
#   ./local-dev/stack.sh --http 127.0.0.1:9000 --batching-window-ms 5000
#   ./local-dev/stack.sh --s3s           # S3 on s3s-fs (local-dev/s3s.sh), the rest on moto
#
# Its output (stdout) carries the functions' logs too, so `> stack.log`
# keeps what each invocation did.
#
# It builds the full CLI (`--features full`: the AWS SDK and the functions'
# handlers) in the quick start's target directory and profile, so after
# `cargo run --release --bin floe -- demo` only those parts compile.
set -euo pipefail
cd "$(dirname "$0")/.."

endpoint="$(bash local-dev/aws.sh)"
endpoint_args=(--endpoint "$endpoint")
# The MSK source, on FLOE_LOCAL_KAFKA's broker when set (a Kafka of your
# own), else on kafka.sh's; without a broker the stack runs the others and
# says so.
if [ -z "${FLOE_LOCAL_KAFKA:-}" ]; then
  if kafka="$(bash local-dev/kafka.sh)"; then
    export FLOE_LOCAL_KAFKA="$kafka"
  else
    echo "stack.sh: no Kafka broker (local-dev/kafka.sh failed above); the stack runs without the Kafka source" >&2
  fi
fi
if [ "${1:-}" = "--s3s" ]; then
  shift
  # S3 on s3s-fs, SQS, Glue, Kinesis and DynamoDB on moto: per service,
  # through the SDK's own variables.
  export AWS_ENDPOINT_URL="$endpoint" AWS_ENDPOINT_URL_S3="$(bash local-dev/s3s.sh)"
  endpoint_args=()
fi
# moto takes any credentials; the SDK wants some.
export AWS_ACCESS_KEY_ID="${AWS_ACCESS_KEY_ID:-testing}"
export AWS_SECRET_ACCESS_KEY="${AWS_SECRET_ACCESS_KEY:-testing}"
export AWS_EC2_METADATA_DISABLED=true

if [ -z "${FLOE_BIN:-}" ]; then
  cargo build --release --locked --bin floe --features full
  FLOE_BIN="${CARGO_TARGET_DIR:-target}/release/floe"
fi
# What the follow-up commands in another shell need: the same credentials
# (without them the SDK asks the EC2 metadata service, and fails), the
# binary (an alias, and FLOE_BIN for scripts) and the Kafka broker.
mkdir -p floe-local
bin="$(cd "$(dirname "$FLOE_BIN")" && pwd)/$(basename "$FLOE_BIN")"
cat > floe-local/env <<EOF
export AWS_ACCESS_KEY_ID='$AWS_ACCESS_KEY_ID' AWS_SECRET_ACCESS_KEY='$AWS_SECRET_ACCESS_KEY'
export AWS_EC2_METADATA_DISABLED=true
export FLOE_BIN='$bin'
alias floe='$bin'
EOF
if [ -n "${FLOE_LOCAL_KAFKA:-}" ]; then
  echo "export FLOE_LOCAL_KAFKA='$FLOE_LOCAL_KAFKA'" >> floe-local/env
fi
if [ -n "${AWS_ENDPOINT_URL_S3:-}" ]; then
  echo "export AWS_ENDPOINT_URL='$AWS_ENDPOINT_URL' AWS_ENDPOINT_URL_S3='$AWS_ENDPOINT_URL_S3'" >> floe-local/env
fi
echo "stack.sh: in another shell, \`. floe-local/env\` first (the credentials and a floe alias for the commands below)"
exec "$FLOE_BIN" local "${endpoint_args[@]}" "$@" 2>&1
