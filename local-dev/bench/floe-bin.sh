#!/usr/bin/env bash
# Prints the path of the floe binary the bench scripts run: FLOE_BIN when
# set (an earlier build, to measure beside this one), else this checkout's
# release build, built first with any cargo arguments given (--features full).
# Usage (from the repository root): floe="$(local-dev/bench/floe-bin.sh [ARGS])"
set -euo pipefail
if [ -n "${FLOE_BIN:-}" ]; then
  echo "$FLOE_BIN"
else
  cargo build --release --locked --bin floe "$@" >/dev/null
  echo "${CARGO_TARGET_DIR:-target}/release/floe"
fi
