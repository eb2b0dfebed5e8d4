#!/usr/bin/env python3
"""Fails when the modules of a crate import each other in a cycle.

Nodes are modules; an edge a -> b is a `crate::b` or `super::b` path in a's
source (its tests and comments excluded; string literals are kept whole, so
the `//` of "s3://bucket" opens no comment). A module and its own parent or
children are not compared (a parent re-exporting a child is not a cycle);
siblings at every level are, and so are top-level modules with each other,
each taken with everything inside it.

With no argument it checks the `src/` of every workspace member (the root
Cargo.toml's `members`), so a crate split out of floe-core (floe-postgres)
stays checked; arguments name the source directories to check instead.
Between crates, cargo itself refuses a cycle of normal dependencies: an
integration's crate sits above floe-core, never the other way round.
"""
import re
import sys
import tomllib
from pathlib import Path


def workspace_sources() -> list:
    """The `src/` of each workspace member, in the order Cargo.toml lists them."""
    repo = Path(__file__).resolve().parent.parent
    members = tomllib.loads((repo / "Cargo.toml").read_text())["workspace"]["members"]
    found = [d / "src" for m in members for d in sorted(repo.glob(m)) if (d / "src").is_dir()]
    # Named from the working directory when inside it (test.sh runs from the root).
    here = Path.cwd().resolve()
    return [p.relative_to(here) if p.is_relative_to(here) else p for p in found]


def module_of(root: Path, path: Path) -> tuple:
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] in ("mod", "lib"):
        parts.pop()
    return tuple(parts)


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


def targets(modules: dict, module: tuple, text: str):
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


def check(root: Path) -> bool:
    """Prints the cycles among `root`'s modules, or one line saying there are none."""
    modules = {module_of(root, p): p for p in root.rglob("*.rs")}
    edges = {}
    for module, path in modules.items():
        for target in targets(modules, module, body(path.read_text())):
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
        print(f"cycle in {root}: {name(a)} <-> {name(b)}")
    for c in long:
        print(f"cycle in {root}: " + " -> ".join(name(m) for m in c + [c[0]]))
    if cycles or long:
        return False
    print(f"no import cycles among the {len(modules)} modules of {root}")
    return True


roots = [Path(a) for a in sys.argv[1:]] or workspace_sources()
# Every root, even after a failure: one run names every cycle.
results = [check(root) for root in roots]
if not all(results):
    sys.exit(1)
