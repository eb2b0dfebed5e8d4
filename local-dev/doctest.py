#!/usr/bin/env python3
"""Runs the shell and Python blocks of the README and the docs' how-tos as
written, and checks their output where the text promises it.

    local-dev/doctest.py [--list] [FILE.md ...]   (default: DOCS below)

Conventions (one bash session per document, a fresh directory for each):
- Every ```sh block runs, in document order, in ONE `bash` per document, so
  variables, aliases (`expand_aliases` is on), the working directory and
  background jobs carry from block to block. Each block runs under
  `set -euo pipefail`: a failing command fails it, shows its output and the
  block's file:line, and the document's later blocks do not run. A ```python
  block runs with $FLOE_PYTHON in that session's directory.
- The session starts in a fresh temporary directory that looks like a clone's
  root: every top-level entry the repository tracks is symlinked in, and
  `target/release/floe` (the README's alias) and `floe` on PATH are the
  binary under test, FLOE_BIN (default $CARGO_TARGET_DIR/debug/floe,
  CARGO_TARGET_DIR defaulting to ~/.cache/floe-target). The venv of
  $FLOE_PYTHON is first on PATH, as if activated; HOME is fresh too, with
  DuckDB's extension directory holding the venv's offline extension wheels,
  so `INSTALL iceberg` needs no network. FLOE_BIN and FLOE_VENV are set to
  that binary and venv (so local-dev/stack.sh and aws.sh build and install
  nothing); no other FLOE_* or AWS_* variable is. Background jobs left at
  the end of a document are killed.
- A ```text block right after a ```sh or ```python block (only blank lines,
  or one line ending in ":", between them) is its expected stdout+stderr,
  matched line by line with trycmd's wildcards: `[..]` matches anything
  within a line, a line `...` any number of lines.
- `<!-- doctest: skip: REASON -->` on the line before a block skips it; the
  reason is required and printed in the summary.
Exit status 1 when a block fails or its output drifts from the text.
"""

import argparse
import os
import re
import select
import shutil
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DOCS = ["README.md", "docs/cdc.md", "docs/maintenance.md", "docs/deploy.md"]
RUN_LANGS = {"sh": "sh", "bash": "sh", "python": "python"}
FENCE = re.compile(r"^(\s*)(```+|~~~+)\s*([\w+-]*)")
SKIP = re.compile(r"^\s*<!--\s*doctest:\s*skip(?::\s*(.*?))?\s*-->\s*$")
TIMEOUT = int(os.environ.get("FLOE_DOCTEST_TIMEOUT", "600"))


class Block:
    def __init__(self, path, line, lang, code):
        self.path, self.line, self.lang, self.code = path, line, lang, code
        self.skip = None       # the reason, when skipped
        self.error = None      # a malformed marker
        self.expected = None   # the expected output's lines
        self.expected_line = None

    def where(self):
        return f"{self.path}:{self.line}"


def parse(path):
    """The runnable blocks of a Markdown file, with their skips and expected
    outputs (a skip marker without a reason fails its block)."""
    lines = (ROOT / path).read_text(encoding="utf-8").splitlines()
    fences = []  # (start index, lang, body lines, end index)
    i = 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        marker, lang = m.group(2), m.group(3).lower()
        j = i + 1
        while j < len(lines) and not lines[j].strip().startswith(marker):
            j += 1
        fences.append((i, lang, lines[i + 1:j], j))
        i = j + 1
    blocks = []
    for n, (start, lang, body, end) in enumerate(fences):
        if lang not in RUN_LANGS:
            continue
        b = Block(path, start + 1, RUN_LANGS[lang], "\n".join(body) + "\n")
        k = start - 1
        while k >= 0 and not lines[k].strip():
            k -= 1
        if k >= 0 and "doctest" in lines[k] and lines[k].lstrip().startswith("<!--"):
            m = SKIP.match(lines[k])
            if not m or not (m.group(1) or "").strip():
                b.error = (f"the marker at {path}:{k + 1} needs a reason: "
                           "<!-- doctest: skip: REASON -->")
            else:
                b.skip = m.group(1).strip()
        if n + 1 < len(fences) and fences[n + 1][1] == "text":
            between = [x for x in lines[end + 1:fences[n + 1][0]] if x.strip()]
            if not between or (len(between) == 1 and between[0].rstrip().endswith(":")):
                b.expected = fences[n + 1][2]
                b.expected_line = fences[n + 1][0] + 2
        blocks.append(b)
    return blocks


def line_matches(pattern, actual):
    parts = pattern.split("[..]")
    if len(parts) == 1:
        return pattern == actual
    rx = ".*?".join(re.escape(p) for p in parts)
    return re.fullmatch(rx, actual, re.S) is not None


def match(expected, actual):
    """None when `actual` matches `expected`, else the index of the expected
    line where matching got stuck (the furthest any attempt reached)."""
    memo, furthest = {}, [0]

    def go(i, j):
        if (i, j) in memo:
            return memo[(i, j)]
        furthest[0] = max(furthest[0], i)
        if i == len(expected):
            ok = j == len(actual)
        elif expected[i].strip() == "...":
            ok = any(go(i + 1, k) for k in range(j, len(actual) + 1))
        else:
            ok = j < len(actual) and line_matches(expected[i], actual[j]) and go(i + 1, j + 1)
        memo[(i, j)] = ok
        return ok

    sys.setrecursionlimit(max(10000, 4 * (len(expected) + len(actual))))
    return None if go(0, 0) else min(furthest[0], max(len(expected) - 1, 0))


def normalize(text):
    out = [l.rstrip() for l in text.replace("\r\n", "\n").split("\n")]
    while out and not out[-1]:
        out.pop()
    return out


def git_entries():
    names = subprocess.run(["git", "ls-files"], cwd=ROOT, check=True,
                           capture_output=True, text=True).stdout.split("\n")
    return sorted({n.split("/")[0] for n in names if n})


def seed_duckdb(home, python):
    """DuckDB's extension directory, filled from the venv's offline wheels
    (duckdb-extension-*), so `INSTALL x; LOAD x` needs no network."""
    script = ("import duckdb, importlib, pathlib, platform\n"
              "print(duckdb.__version__)\n"
              "for name in ('iceberg', 'avro', 'httpfs'):\n"
              "    try:\n"
              "        m = importlib.import_module('duckdb_extension_' + name)\n"
              "    except ImportError:\n"
              "        continue\n"
              "    for f in pathlib.Path(m.__path__[0]).glob('extensions/*/*.duckdb_extension'):\n"
              "        print(f)\n")
    r = subprocess.run([python, "-c", script], capture_output=True, text=True)
    if r.returncode != 0:
        return
    version, *files = r.stdout.split()
    plat = {"x86_64": "linux_amd64", "aarch64": "linux_arm64"}.get(os.uname().machine)
    if not plat or sys.platform != "linux":
        return
    d = home / ".duckdb" / "extensions" / f"v{version}" / plat
    d.mkdir(parents=True, exist_ok=True)
    for f in files:
        (d / Path(f).name).symlink_to(f)


class Session:
    """One bash per document, fed block after block on its stdin; each block
    reports its end on fd 3 (closed inside the block, so background jobs do
    not hold it)."""

    def __init__(self, work, clone, env):
        self.work = work
        r, w = os.pipe()
        self.proc = subprocess.Popen(
            ["bash", "--noprofile", "--norc", "-s"], stdin=subprocess.PIPE,
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=clone, env=env,
            pass_fds=(w,), start_new_session=True, text=True)
        os.close(w)
        self.done = os.fdopen(r)
        # fd 3 only: the pipe's own number is not left open for the blocks.
        self.send(f"exec 3>&{w}\n" + (f"exec {w}>&-\n" if w != 3 else "") + "shopt -s expand_aliases\n")

    def send(self, text):
        self.proc.stdin.write(text)
        self.proc.stdin.flush()

    def run(self, n, block, python):
        src = self.work / f"block{n}.{ 'py' if block.lang == 'python' else 'sh'}"
        src.write_text(block.code)
        out, err = self.work / f"block{n}.out", self.work / f"block{n}.err"
        if block.lang == "python":
            cmd = f"{sh_quote(python)} {sh_quote(str(src))}"
        else:
            cmd = f"source {sh_quote(str(src))}"
        self.send(
            f"trap 'printf \"%s %s\\n\" \"$?\" \"$LINENO\" > {err}' ERR\n"
            f"set -euo pipefail\n"
            f"{cmd} < /dev/null > {sh_quote(str(out))} 2>&1 3>&-\n"
            f"trap - ERR\n"
            f"echo {n} >&3\n")
        ready, _, _ = select.select([self.done], [], [], TIMEOUT)
        line = self.done.readline() if ready else None
        output = out.read_text(errors="replace") if out.exists() else ""
        if line is None:
            return False, output, f"timed out after {TIMEOUT} s"
        if line.strip() == str(n):
            return True, output, None
        # The shell exited: set -e stopped it.
        try:
            status = self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            status = "?"
        why = f"exit status {status}"
        if err.exists():
            code, lineno = (err.read_text().split() + ["?", "?"])[:2]
            if block.lang == "sh" and lineno.isdigit():
                why = f"exit status {code} at {block.path}:{block.line + int(lineno)}"
        return False, output, why

    def close(self):
        try:
            os.killpg(self.proc.pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
        try:
            self.proc.stdin.close()
        except BrokenPipeError:
            pass
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            pass
        try:  # whatever the TERM left behind
            os.killpg(self.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.done.close()


def sh_quote(s):
    return "'" + s.replace("'", "'\\''") + "'"


def run_document(path, blocks, floe_bin, python, results):
    base = Path(tempfile.mkdtemp(prefix="floe-doctest-"))
    clone, home, bindir, work = base / "clone", base / "home", base / "bin", base / "ctl"
    for d in (clone, home, bindir, work):
        d.mkdir()
    for name in git_entries():
        if (ROOT / name).exists():
            (clone / name).symlink_to(ROOT / name)
    (clone / "target" / "release").mkdir(parents=True)
    (clone / "target" / "release" / "floe").symlink_to(floe_bin)
    (bindir / "floe").symlink_to(floe_bin)
    seed_duckdb(home, python)
    # A newcomer's shell: none of floe's variables or AWS credentials, no
    # backtraces or logs. What the suite already built and installed stands
    # in for the builds and installs the scripts would do: FLOE_BIN (so
    # stack.sh runs the binary under test) and FLOE_VENV (moto's venv).
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("FLOE_", "RUST_", "AWS_")) and k not in ("OLDPWD", "BASH_ENV", "ENV", "CDPATH")}
    env.update(HOME=str(home), PWD=str(clone), FLOE_PYTHON=python, FLOE_BIN=str(floe_bin),
               FLOE_VENV=str(Path(python).parent.parent),
               PATH=os.pathsep.join([str(bindir), str(Path(python).parent), os.environ["PATH"]]))
    session = Session(work, clone, env)
    failed_at = None
    try:
        for n, b in enumerate(blocks):
            if b.skip:
                results.append((b, "skipped", b.skip))
                continue
            if b.error:
                results.append((b, "failed", b.error))
                print(f"FAILED  {b.where()}: {b.error}", flush=True)
                continue
            if failed_at is not None:
                results.append((b, "not run", f"after the failure at {failed_at}"))
                continue
            ok, output, why = session.run(n, b, python)
            if not ok:
                failed_at = b.where()
                results.append((b, "failed", why))
                report(b, f"FAILED ({why})", output)
                continue
            if b.expected is not None:
                exp, act = normalize("\n".join(b.expected)), normalize(output)
                stuck = match(exp, act)
                if stuck is not None:
                    at = f"{b.path}:{b.expected_line + stuck}"
                    results.append((b, "failed", f"output drifted at {at}"))
                    report(b, f"OUTPUT DRIFTED: no match for {at}: {exp[stuck]!r}; the output was",
                           "\n".join(act))
                    continue
            results.append((b, "ok", None))
            print(f"ok      {b.where()}", flush=True)
    finally:
        session.close()
        shutil.rmtree(base, ignore_errors=True)


def report(block, what, text):
    print(f"FAILED  {block.where()}: {what}", flush=True)
    lines = text.rstrip("\n").splitlines()
    if len(lines) > 80:
        lines = lines[:40] + [f"[... {len(lines) - 80} lines ...]"] + lines[-40:]
    for l in lines:
        print(f"    | {l}")


def relative(f):
    """A file argument as a path from the repository's root when it is in it."""
    p = Path(f).resolve()
    return str(p.relative_to(ROOT)) if p.is_relative_to(ROOT) else str(p)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--list", action="store_true", help="list the blocks, run nothing")
    ap.add_argument("files", nargs="*", help=f"Markdown files (default: {' '.join(DOCS)})")
    a = ap.parse_args()
    files = [relative(f) for f in a.files] or DOCS
    docs = [(f, parse(f)) for f in files]
    if a.list:
        for f, blocks in docs:
            for b in blocks:
                what = f"skip: {b.skip}" if b.skip else f"FAILS: {b.error}" if b.error else (
                    f"expects {len(b.expected)} lines (:{b.expected_line})" if b.expected is not None
                    else "runs")
                first = b.code.strip().splitlines()[0] if b.code.strip() else ""
                print(f"{b.where():24} {b.lang:6} {what:40.40}  {first[:60]}")
        return 1 if any(b.error for _, blocks in docs for b in blocks) else 0
    target = os.environ.get("CARGO_TARGET_DIR") or str(Path.home() / ".cache" / "floe-target")
    floe_bin = Path(os.environ.get("FLOE_BIN") or Path(target) / "debug" / "floe").resolve()
    venv = os.environ.get("FLOE_VENV") or str(Path.home() / ".cache" / "floe-venv")
    python = os.environ.get("FLOE_PYTHON") or str(Path(venv) / "bin" / "python")
    if not floe_bin.is_file():
        sys.exit(f"doctest: no floe binary at {floe_bin} (set FLOE_BIN, or build it: cargo build --bin floe)")
    if not Path(python).is_file():
        sys.exit(f"doctest: no Python at {python} (set FLOE_PYTHON; local-dev/test.sh makes the venv)")
    python = os.path.abspath(python)
    results = []
    for f, blocks in docs:
        print(f"== {f} ({floe_bin})", flush=True)
        run_document(f, blocks, floe_bin, python, results)
    ran = sum(1 for _, s, _ in results if s in ("ok", "failed"))
    failed = sum(1 for _, s, _ in results if s == "failed")
    notrun = sum(1 for _, s, _ in results if s == "not run")
    reasons = {}
    for b, s, why in results:
        if s == "skipped":
            reasons.setdefault(why, []).append(b.where())
    for why, where in reasons.items():
        print(f"skipped {', '.join(where)}: {why}")
    for b, s, why in results:
        if s in ("failed", "not run"):
            print(f"{s:7} {b.where()}: {why}")
    skipped = sum(len(w) for w in reasons.values())
    summary = f"{ran} blocks ran, {skipped} skipped ({'; '.join(reasons) or 'none'}), {failed} failed"
    if notrun:
        summary += f", {notrun} not run after a failure"
    print(summary)
    return 1 if failed or notrun else 0


if __name__ == "__main__":
    sys.exit(main())
