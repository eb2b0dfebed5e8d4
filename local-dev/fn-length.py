#!/usr/bin/env python3
"""Fails when a function of any crate runs over 80 lines and its doc does
not say why ("Long because ...").

Tests are left out (a `#[cfg(test)] mod`, `tests.rs`, `tests/`, benches). A
function's length is from its `fn` line to its closing brace, braces in
strings, char literals and comments not counted. With `--top N` it also
prints the N longest functions, for before/after counts.
"""
import re
import sys
from pathlib import Path

LIMIT = 80
REPO = Path(__file__).resolve().parent.parent
# Every crate's library and binaries.
ROOTS = ["shared/src", "local-dev/src", "postgres/src", "functions", "test-support/src"]
FN = re.compile(r"^\s*(pub(\([^)]*\))?\s+)?(async\s+)?(const\s+)?(unsafe\s+)?fn\s+(\w+)")
STRING = re.compile(r'"(\\.|[^"\\])*"')
# A char or byte literal ('{', b'}', '\''); a lone quote opens a lifetime.
CHAR = re.compile(r"b?'(\\.|[^'\\])'")


def code_end(lines: list) -> int:
    """The line where the file's test module starts, or its end."""
    for i, line in enumerate(lines[:-1]):
        # Only an inline module ends the code: `mod tests;` is a file of its own.
        if re.match(r"\s*#\[cfg\(test\)\]", line) and re.match(r"\s*(pub(\(\w+\))? )?mod\s+\w+\s*\{", lines[i + 1]):
            return i
    return len(lines)


def functions(path: Path):
    """(length, name, line, doc) of each function with a body in `path`."""
    lines = path.read_text().split("\n")
    end = code_end(lines)
    i = 0
    while i < end:
        m = FN.match(lines[i])
        if not m:
            i += 1
            continue
        j = i
        while j < end and "{" not in lines[j] and not lines[j].rstrip().endswith(";"):
            j += 1
        if j >= end or "{" not in lines[j]:
            i = j + 1
            continue
        depth, k = 0, j
        while k < end:
            code = CHAR.sub("''", STRING.sub('""', lines[k])).split("//")[0]
            depth += code.count("{") - code.count("}")
            if depth <= 0:
                break
            k += 1
        doc, q = [], i - 1
        while q >= 0 and (lines[q].strip().startswith("///") or lines[q].strip().startswith("#[")):
            doc.append(lines[q].strip())
            q -= 1
        yield k - i + 1, m.group(6), i + 1, " ".join(reversed(doc))
        i = k + 1


def main() -> int:
    top = int(sys.argv[sys.argv.index("--top") + 1]) if "--top" in sys.argv else 0
    found = []
    for root in ROOTS:
        for path in sorted((REPO / root).rglob("*.rs")):
            parts = path.relative_to(REPO).parts
            if "tests" in parts or path.name == "tests.rs" or "benches" in parts:
                continue
            for length, name, line, doc in functions(path):
                found.append((length, f"{path.relative_to(REPO)}:{line}", name, doc))
    found.sort(key=lambda f: -f[0])
    long = [f for f in found if f[0] > LIMIT]
    unexplained = [f for f in long if "Long because" not in f[3]]
    for length, where, name, _ in found[:top]:
        print(f"{length:5} {where} {name}")
    for length, where, name, _ in unexplained:
        print(f"{where}: {name} is {length} lines; split it, or say in its doc why it is long (\"Long because ...\")")
    print(f"fn length: {len(found)} functions, {len(long)} over {LIMIT} lines, each saying why" if not unexplained
          else f"fn length: {len(unexplained)} of {len(long)} functions over {LIMIT} lines do not say why")
    return 1 if unexplained else 0


if __name__ == "__main__":
    sys.exit(main())
