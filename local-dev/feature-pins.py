#!/usr/bin/env python3
"""Checks that the quick-start CLI and the full CLI build every shared crate
with one feature set.

`cargo run --release --bin floe` (the quick start) and `--features full`
share a target directory. Where a crate of both builds gets other features in
the full one (chrono's serde, tracing's log, ... switched on by the AWS SDK),
cargo compiles it again and everything above it (arrow, parquet, iceberg-rust):
a second cold build of what the quick start built. local-dev/Cargo.toml pins
those features in the quick start too; this names any crate a dependency
update makes differ again, with the features to pin.
"""

import subprocess
import sys


def features(*extra):
    out = subprocess.run(
        ["cargo", "tree", "-p", "floe-cli", "--locked", "-e", "normal,build",
         "-f", "{p}|{f}", "--prefix", "none", *extra],
        check=True, capture_output=True, text=True).stdout
    crates = {}
    for line in out.splitlines():
        if "|" not in line:
            continue
        package, feats = line.split("|", 1)
        name = " ".join(package.split()[:2])
        crates[name] = set(filter(None, feats.replace("(*)", "").strip().split(",")))
    return crates


quick = features()
full = features("--features", "full")
ours = ("floe-cli ", "floe-core ")
drift = {name: sorted(full[name] - quick[name]) for name in quick
         if name in full and full[name] != quick[name] and not name.startswith(ours)}
for name, added in sorted(drift.items()):
    print(f"{name}: the full build adds features {', '.join(added)}; "
          "pin them in local-dev/Cargo.toml's feature pins", file=sys.stderr)
if drift:
    sys.exit(1)
print(f"feature pins: {len(quick)} crates of the quick start, one feature set each in the full build")
