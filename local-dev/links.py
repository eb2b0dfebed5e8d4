#!/usr/bin/env python3
"""Fails when a relative link in a Markdown file of the repository points to
a file that does not exist, or to a heading anchor the target does not have
(anchors as GitHub makes them: lowercased, punctuation dropped, spaces to
hyphens, -1, -2 ... for repeats). Links to other sites are not followed."""

import re
import subprocess
import sys
from pathlib import Path

root = Path(__file__).resolve().parent.parent
LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
FENCE = re.compile(r"^\s*(```|~~~)")


def prose(path):
    """The file's lines outside fenced code blocks."""
    inside = False
    for line in path.read_text(encoding="utf-8").splitlines():
        if FENCE.match(line):
            inside = not inside
            continue
        if not inside:
            yield line


def anchors(path):
    seen, out = {}, set()
    for line in prose(path):
        m = re.match(r"^#{1,6}\s+(.*?)\s*#*\s*$", line)
        if not m:
            continue
        slug = re.sub(r"[^\w\- ]", "", m.group(1).strip().lower()).replace(" ", "-")
        n = seen.get(slug, 0)
        seen[slug] = n + 1
        out.add(slug if n == 0 else f"{slug}-{n}")
    return out


files = subprocess.run(["git", "ls-files", "*.md"], cwd=root, check=True,
                       capture_output=True, text=True).stdout.split()
broken = []
for name in files:
    path = root / name
    for line in prose(path):
        for target in LINK.findall(re.sub(r"`[^`]*`", "", line)):
            if re.match(r"^[a-z][a-z0-9+.-]*:", target):
                continue
            file_part, _, anchor = target.partition("#")
            dest = (path.parent / file_part).resolve() if file_part else path
            if not dest.exists():
                broken.append(f"{name}: link to {target}: no such file")
            elif anchor and dest.suffix == ".md" and anchor not in anchors(dest):
                broken.append(f"{name}: link to {target}: no heading with that anchor")
for b in broken:
    print(b, file=sys.stderr)
if broken:
    sys.exit(1)
print(f"links: {len(files)} Markdown files, every relative link and anchor resolves")
