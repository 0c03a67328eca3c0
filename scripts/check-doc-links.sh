#!/usr/bin/env bash
# Checks the relative links of the project's Markdown files (README.md, docs/, the folders'
# README.md): every link target file or folder must exist, and every #anchor must match a
# heading of the target file as GitHub makes anchors (lower case, punctuation but '-' and '_'
# dropped, each space a '-', repeated headings suffixed -1, -2, ...). Links inside code blocks
# and code spans are not links; http(s) and mailto links are not checked.
#
# Usage: scripts/check-doc-links.sh [FILE.md...]   (default: every *.md of the source tree)
# Exit 0 when every link resolves, 1 listing the broken ones (ctest's docs_links runs this).
set -euo pipefail
cd "$(dirname "$0")/.."
if [ $# -eq 0 ]; then
  mapfile -t files < <(find . -name '*.md' -not -path './.git/*' -not -path './build*' \
    -not -path '*/node_modules/*' | sed 's|^\./||' | sort)
else
  files=("$@")
fi
exec /usr/bin/python3 - "${files[@]}" <<'EOF'
import os, re, sys

def strip_code(text):
    """The text with fenced code blocks blanked (line numbers kept) and code spans removed."""
    out, fence = [], None
    for line in text.split("\n"):
        m = re.match(r"^\s*(```+|~~~+)", line)
        if fence:
            if m and m.group(1)[0] == fence[0] and len(m.group(1)) >= len(fence):
                fence = None
            out.append("")
            continue
        if m:
            fence = m.group(1)
            out.append("")
            continue
        out.append(re.sub(r"(`+)(?:(?!\1).)*?\1", "", line))
    return out

def slug(heading):
    s = heading.strip().lower()
    s = re.sub(r"[^\w\- ]", "", s)  # \w keeps letters, digits and '_' (Unicode too)
    return s.replace(" ", "-")

anchors_cache = {}
def anchors(path):
    if path not in anchors_cache:
        found, seen = set(), {}
        with open(path, encoding="utf-8") as f:
            raw = f.read().split("\n")
        for plain, line in zip(strip_code("\n".join(raw)), raw):
            if not plain:
                continue
            m = re.match(r"^#{1,6}\s+(.*?)\s*#*\s*$", line)
            if not m:
                continue
            base = slug(m.group(1))
            n = seen.get(base, 0)
            seen[base] = n + 1
            found.add(base if n == 0 else f"{base}-{n}")
        anchors_cache[path] = found
    return anchors_cache[path]

broken = 0
link = re.compile(r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*<?([^)\s>]*)>?(?:\s+\"[^\"]*\")?\s*\)")
for md in sys.argv[1:]:
    with open(md, encoding="utf-8") as f:
        lines = strip_code(f.read())
    for number, line in enumerate(lines, 1):
        for m in link.finditer(line):
            target = m.group(1)
            if not target or re.match(r"^[a-z][a-z0-9+.-]*:", target):
                continue  # empty, or a URL (http:, https:, mailto:, ...)
            file_part, _, anchor = target.partition("#")
            path = os.path.normpath(os.path.join(os.path.dirname(md), file_part)) if file_part else md
            problem = None
            if not os.path.exists(path):
                problem = f"no such file: {path}"
            elif anchor:
                if not path.endswith(".md") or os.path.isdir(path):
                    problem = f"an anchor into {path}, which is not a Markdown file"
                elif anchor not in anchors(path):
                    problem = f"no heading for #{anchor} in {path}"
            if problem:
                print(f"{md}:{number}: ({target}) {problem}", file=sys.stderr)
                broken += 1
if broken:
    print(f"check-doc-links: {broken} broken link(s)", file=sys.stderr)
    sys.exit(1)
print(f"check-doc-links: every relative link of {len(sys.argv) - 1} files resolves")
EOF
