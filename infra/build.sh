#!/usr/bin/env bash
# Builds floe's Lambda functions with cargo-lambda and plans one of the
# Terraform examples against the zips, in one step.
#
#   infra/build.sh [EXAMPLE]        EXAMPLE: quickstart (default) or cdc-kinesis
#
#   ARCH=arm64                      build for Graviton (cargo lambda build --arm64;
#                                   needs the aarch64-unknown-linux-gnu target)
#   CARGO_TARGET_DIR=DIR            honoured: zips land in DIR/lambda/<bin>/bootstrap.zip
#   TF_PLAN_ARGS="-var region=..."  extra arguments for terraform plan
#
# Then: terraform -chdir=infra/examples/EXAMPLE apply tfplan
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/.." && pwd)"
example="${1:-quickstart}"
arch="${ARCH:-x86_64}"
example_dir="$here/examples/$example"

if [[ ! -d "$example_dir" ]]; then
  echo "no example $example (have: $(ls "$here/examples" | tr '\n' ' '))" >&2
  exit 2
fi
case "$arch" in
  x86_64 | arm64) ;;
  *)
    echo "ARCH must be x86_64 or arm64, not $arch" >&2
    exit 2
    ;;
esac
command -v cargo-lambda >/dev/null || {
  echo "cargo-lambda is missing: https://www.cargo-lambda.info/guide/installation.html" >&2
  exit 2
}
command -v terraform >/dev/null || {
  echo "terraform is missing" >&2
  exit 2
}

# Where cargo puts its output; a relative CARGO_TARGET_DIR is relative to the
# directory cargo runs in, which is the repository root here.
target_dir="${CARGO_TARGET_DIR:-$repo/target}"
[[ "$target_dir" == /* ]] || target_dir="$PWD/$target_dir"
artifacts="$target_dir/lambda"

# The functions the module deploys.
bins=()
for bin in floe-writer floe-committer floe-ingest-http floe-maintenance floe-pg-sync; do
  if ! grep -qs "^name = \"$bin\"" "$repo"/functions/*/Cargo.toml; then
    echo "no $bin binary in the workspace" >&2
    exit 1
  fi
  bins+=(--bin "$bin")
done
tf_vars=(-var "artifacts_dir=$artifacts" -var "architecture=$arch")

# The `lambda` profile (Cargo.toml): no debug info, stripped, thin LTO.
# --workspace: the functions are not among the default members (the CLI is).
build=(cargo lambda build --profile lambda --output-format zip --workspace "${bins[@]}")
[[ "$arch" == arm64 ]] && build+=(--arm64)
echo "+ ${build[*]}" >&2
(cd "$repo" && CARGO_TARGET_DIR="$target_dir" "${build[@]}")

for ((i = 1; i < ${#bins[@]}; i += 2)); do
  zip="$artifacts/${bins[$i]}/bootstrap.zip"
  [[ -f "$zip" ]] || {
    echo "expected $zip after the build" >&2
    exit 1
  }
  echo "$(du -h "$zip" | cut -f1) $zip" >&2
done

terraform -chdir="$example_dir" init -input=false
# shellcheck disable=SC2086 # TF_PLAN_ARGS is split on purpose
terraform -chdir="$example_dir" plan -input=false -out=tfplan "${tf_vars[@]}" ${TF_PLAN_ARGS:-}
echo "apply with: terraform -chdir=$example_dir apply tfplan" >&2
