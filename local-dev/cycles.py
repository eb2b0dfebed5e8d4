#!/usr/bin/env python3
"""Fails when the modules of a crate import each other in a cycle.

Nodes are modules; an edge a -> b is a `crate::b` or `super::b` path in a's
source (its tests and comments excluded; string literals are kept whole, so
the `//` of "s3://bucket" opens no comment). A module and its own parent or
children are not compared (a parent re-exporting a child is not a cycle);
siblings at every level are, and so are top-level modules with each other,
each taken with everything inside it.
"""
import re
import sys
from pathlib import Path

root = Path(sys.argv[1] if len(sys.argv) > 1 else "shared/src")


def module_of(path: Path) -> tuple:
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] in ("mod", "lib"):
        parts.pop()
    return tuple(parts)


modules = {module_of(p): p for p in root.rglob("*.rs")}
PATH = re.compile(r"\b(crate|super)((?:::\w+)+)")
GROUP = re.compile(r"\b(crate|super)::((?:\w+::)*)\{([^}]*)\}")


# A char literal ('x', '\'', '\u{1F600}'); any other quote opens a lifetime
# or a label, which has no closing quote.
CHAR = re.compile(r"'(?:\\(?:u\{[0-9a-fA-F_]*\}|x[0-9a-fA-F]{2}|.)|[^\\'\n])'")
# A raw string's opening (r"…", r#"…"#, br"…", cr"…"); `r#type` is a raw
# identifier, not a string.
RAW = re.compile(r'(?<![\w])[bc]?r(#*)"')
# A normal string's opening ("…", b"…", c"…"): a bare quote always is one.
STRING = re.compile(r'(?:(?<![\w])[bc])?"')


def strip_comments(text: str) -> str:
    """`text` without its comments, string and char literals kept whole.

    A `//` or `/*` inside a literal ("s3://bucket") opens no comment, and a
    quote inside a comment (doesn't) opens no literal.
    """
    out, i, n = [], 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            end = text.find("\n", i)
            i = n if end < 0 else end
        elif text.startswith("/*", i):
            # Block comments nest.
            depth, i = 1, i + 2
            while i < n and depth:
                if text.startswith("/*", i):
                    depth, i = depth + 1, i + 2
                elif text.startswith("*/", i):
                    depth, i = depth - 1, i + 2
                else:
                    i += 1
            out.append(" ")
        elif m := RAW.match(text, i):
            close = '"' + m.group(1)
            end = text.find(close, m.end())
            end = n if end < 0 else end + len(close)
            out.append(text[i:end])
            i = end
        elif m := STRING.match(text, i):
            j = m.end()
            while j < n and text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            end = min(j + 1, n)
            out.append(text[i:end])
            i = end
        elif c == "'" and (m := CHAR.match(text, i)):
            out.append(m.group(0))
            i = m.end()
        else:
            out.append(c)
            i += 1
    return "".join(out)


def body(text: str) -> str:
    # Unit tests may use anything of the crate.
    cut = re.search(r"#\[cfg\(test\)\]\s*mod tests\s*\{", text)
    text = text[: cut.start()] if cut else text
    # Doc links and comments name modules without importing them.
    return strip_comments(text)


def targets(module: tuple, text: str):
    found = []
    for m in PATH.finditer(text):
        found.append((m.group(1), m.group(2).strip(":").split("::")))
    for m in GROUP.finditer(text):
        prefix = [p for p in m.group(2).split("::") if p]
        for item in m.group(3).split(","):
            item = item.strip().split(" ")[0]
            if item and item != "self":
                found.append((m.group(1), prefix + item.split("::")))
            elif item == "self":
                found.append((m.group(1), prefix))
    for kind, segs in found:
        base = [] if kind == "crate" else list(module[:-1])
        full = base + [s for s in segs if s != "super"]
        # The longest prefix that names a module.
        for n in range(len(full), 0, -1):
            if tuple(full[:n]) in modules:
                yield tuple(full[:n])
                break


edges = {}
for module, path in modules.items():
    for target in targets(module, body(path.read_text())):
        # Compare at the level where the two first differ.
        i = 0
        while i < min(len(module), len(target)) and module[i] == target[i]:
            i += 1
        if i == len(module) or i == len(target):
            continue  # parent and child
        a, b = module[: i + 1], target[: i + 1]
        edges.setdefault(a, set()).add(b)

cycles = []
for a, bs in edges.items():
    for b in bs:
        if a < b and a in edges.get(b, set()):
            cycles.append((a, b))
# Longer cycles: depth-first search for back edges.
state, stack, long = {}, [], []


def visit(n):
    state[n] = 1
    stack.append(n)
    for m in sorted(edges.get(n, ())):
        if state.get(m) == 1:
            cyc = stack[stack.index(m):]
            if len(cyc) > 2:
                long.append(cyc)
        elif m not in state:
            visit(m)
    stack.pop()
    state[n] = 2


for n in sorted(edges):
    if n not in state:
        visit(n)

name = lambda m: "::".join(m)
for a, b in cycles:
    print(f"cycle: {name(a)} <-> {name(b)}")
for c in long:
    print("cycle: " + " -> ".join(name(m) for m in c + [c[0]]))
if cycles or long:
    sys.exit(1)
print(f"no import cycles among the {len(modules)} modules of {root}")
