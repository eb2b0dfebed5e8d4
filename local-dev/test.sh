#!/usr/bin/env bash
# Runs every test of floe: formatting, lints, unit and integration tests.
# Installs what the tests need (a Python venv with pyiceberg, DuckDB and
# python-hcl2; checkov in its own venv; Iceberg Java through PySpark) on
# first use and
# reuses a cargo target directory outside the clone so reruns are incremental.
set -euo pipefail
cd "$(dirname "$0")/.."

export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/floe-target}"
venv="${FLOE_VENV:-$HOME/.cache/floe-venv}"
req=local-dev/requirements-test.txt

if [ ! -x "$venv/bin/python" ]; then
  python3 -m venv "$venv"
fi
stamp="$venv/.floe-requirements"
if ! cmp -s "$req" "$stamp" 2>/dev/null; then
  "$venv/bin/pip" install --quiet --disable-pip-version-check -r "$req"
  cp "$req" "$stamp"
fi
export FLOE_PYTHON="$venv/bin/python"

# Each step's start, in seconds since the suite began (docs/benchmarks.md
# names the slow ones).
step() { echo "== $* [${SECONDS} s]"; }

# Every optional part of floe-core is tested: the AWS storage, queue and
# catalogs against moto (local-dev/aws.sh), the REST catalog against
# lakana-server (local-dev/rest.sh); and the Postgres source (its own crate,
# floe-postgres) against a local cluster (local-dev/pg.sh); the tests start
# them themselves. The CLI's tests run its full build (`floe local`, `floe
# pg`, deployments).
features="floe-core/aws,floe-core/rest,floe-postgres/aws,floe-cli/full"

step "cargo fmt --check"
cargo fmt --all -- --check
step "cargo clippy"
cargo clippy --workspace --all-targets --locked --features "$features" -- -D warnings
# The step above builds floe-core with every feature on, so no
# cfg(not(feature = …)) branch of it compiles there: floe-core's library
# alone with none of its features, then with each one alone.
for feature in "" aws rest; do
  step "cargo clippy -p floe-core --no-default-features${feature:+ --features $feature}"
  cargo clippy -p floe-core --lib --locked --no-default-features ${feature:+--features "$feature"} -- -D warnings
done
# The Postgres source without `aws` (no Secrets Manager login).
step "cargo clippy -p floe-postgres --no-default-features"
cargo clippy -p floe-postgres --lib --locked --no-default-features -- -D warnings
# The quick-start CLI (no features): its stand-ins for the parts it leaves out.
step "cargo clippy -p floe-cli (the quick start)"
cargo clippy -p floe-cli --bins --locked -- -D warnings
step "feature pins"
python3 local-dev/feature-pins.py
step "import cycles"
python3 local-dev/cycles.py
step "long functions"
python3 local-dev/fn-length.py
step "links"
python3 local-dev/links.py
# The Terraform module and examples: fmt, validate and `terraform test` where
# the AWS provider is installable offline, and checkov.
local-dev/infra-check.sh
# The second S3 implementation of the local-stack test (`cargo install
# s3s-fs` on first use, a few minutes; cached under ~/.cache/floe-s3s).
step "s3s-fs"
bash local-dev/s3s.sh >/dev/null
# Iceberg Java through PySpark, the third independent reader
# (local-dev/tests/read_java.py): about a minute once, cached under
# ~/.cache/floe-java and the venv.
step "iceberg java"
FLOE_VENV="$venv" bash local-dev/java.sh
step "cargo test"
log="$(mktemp)"
# The delivery harnesses append their verdicts here.
export FLOE_HARNESS_REPORT="$log.harness"
trap 'rm -f "$log" "$log.harness" "$log.docs"' EXIT
# A hang fails the run well inside CI's 90 minutes instead of eating them.
# `|| status=$?`: under pipefail a failure would otherwise end the script
# here, before the summary below.
status=0
timeout 2700 cargo test --workspace --all-targets --no-fail-fast --locked --features "$features" 2>&1 | tee "$log" || status=$?
# The keyed-table tests again with a committer that keeps no file's rows
# between commits, the path a table larger than FLOE_KEY_CACHE_MB takes.
FLOE_KEY_CACHE_MB=0 timeout 600 cargo test --workspace --locked --features "$features" --test cdc 2>&1 | tee -a "$log" || status=$?
# Each Postgres test drops its database's slot when it next runs, so until
# then the slot keeps every WAL file written after it: repeated runs and
# benchmarks filled a developer's disk (52 GB of WAL). None is read between
# runs. (A cleanup that fails loses nothing, so it does not fail the run.)
if pg="$(bash local-dev/pg.sh 2>/dev/null | tail -n 1)"; then
  psql "$pg" -qAtc "SELECT count(pg_drop_replication_slot(slot_name)) FROM pg_replication_slots WHERE NOT active" >/dev/null || true
fi
# The README's and the how-tos' shell and Python blocks, run as written from
# a fresh directory against the debug CLI cargo test just built, their
# output checked against the text blocks after them (local-dev/doctest.py).
step "docs"
docs=0
FLOE_BIN="$CARGO_TARGET_DIR/debug/floe" python3 local-dev/doctest.py 2>&1 | tee "$log.docs" || docs=$?
step "done"
# The slowest test binaries, by the time their tests ran.
# Unit-test binaries are all "src/lib.rs": name them by their crate instead.
awk '/^     Running / { name = $2; if (name == "unittests") { name = $NF; sub(/.*\/deps\//, "", name); sub(/-[0-9a-f]+\)$/, "", name); name = name " (unit tests)" } }
  /^test result:/ { sub("s$", "", $NF); print $NF, name }' "$log" |
  sort -rn | head -5 | awk '{ t = $1; $1 = ""; printf "slowest: %s s%s\n", t, $0 }'
# One closing line for the whole suite: cargo prints one result per target,
# and the last target (the CLI binary) has no unit tests of its own.
# (None when the harnesses did not run: a build failure.)
harness=$({ sed 's/; independent readers.*//' "$log.harness" 2>/dev/null || true; } | paste -sd ';' -)
awk -v h="$harness" '/^test result:/ { p += $4; f += $6 } END { printf "%d passed, %d failed%s\n", p, f, (h == "" ? "" : "; " h) }' "$log"
echo "docs: $(tail -n 1 "$log.docs")"
if [ "$status" -ne 0 ]; then exit "$status"; fi
exit "$docs"
