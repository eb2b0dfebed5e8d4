#!/usr/bin/env bash
# Checks infra/ offline: `terraform fmt`, then `terraform validate` of the
# module and both examples and the module's `terraform test` where the AWS
# provider can be installed (a filesystem mirror such as /opt/tf-plugins, or
# FLOE_TF_PLUGINS), then checkov's scan (installed into a venv under ~/.cache
# on first use). Parts whose tool is missing are skipped with a note, so a
# machine without terraform still runs the rest of the suite.
set -euo pipefail
cd "$(dirname "$0")/.."

if ! command -v terraform >/dev/null; then
  echo "infra-check: terraform not installed; skipped" >&2
else
  echo "== terraform fmt -check"
  TF_CLI_CONFIG_FILE=/dev/null terraform fmt -recursive -check infra

  plugins="${FLOE_TF_PLUGINS:-/opt/tf-plugins}"
  if [ -d "$plugins/registry.terraform.io/hashicorp/aws" ]; then
    rc="$(mktemp)"
    work="$(mktemp -d)"
    trap 'rm -rf "$rc" "$work"' EXIT
    cat >"$rc" <<RC
provider_installation {
  filesystem_mirror {
    path    = "$plugins"
    include = ["registry.terraform.io/hashicorp/aws"]
  }
  direct {
    exclude = ["registry.terraform.io/hashicorp/aws"]
  }
}
RC
    export TF_CLI_CONFIG_FILE="$rc"
    # Copies, so .terraform directories and lock files stay out of the clone.
    cp -r infra "$work/"
    for dir in modules/floe examples/quickstart examples/cdc-kinesis; do
      echo "== terraform validate infra/$dir"
      terraform -chdir="$work/infra/$dir" init -backend=false -input=false >/dev/null
      terraform -chdir="$work/infra/$dir" validate -no-color
    done
    echo "== terraform test infra/modules/floe"
    terraform -chdir="$work/infra/modules/floe" test -no-color
  else
    echo "infra-check: no AWS provider mirror at $plugins; validate and test skipped" >&2
  fi
fi

tools="${FLOE_TOOLS_VENV:-$HOME/.cache/floe-tools}"
if [ ! -x "$tools/bin/checkov" ]; then
  python3 -m venv "$tools"
  "$tools/bin/pip" install --quiet --disable-pip-version-check checkov==3.3.30
fi
echo "== checkov -d infra"
# The scan is offline: checkov's attempt to reach its platform prints a trace
# and changes nothing.
"$tools/bin/checkov" -d infra --quiet --compact --framework terraform 2>/dev/null | tail -n 40
