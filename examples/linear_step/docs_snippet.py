#!/usr/bin/env python3
"""Checks that the code block of a Markdown section quotes the marked regions of a source file.

    docs_snippet.py DOC.md "SECTION HEADING" SOURCE REGION [REGION ...]

A region is the lines between `// [REGION]` and `// [REGION end]` in SOURCE, taken out of their
indentation; the section's first ```cpp block must be the regions in order, separated by one empty
line. Exits 1 naming the first line that differs, so that the page and the compiled example cannot
drift apart.
"""
import sys
import textwrap
from pathlib import Path


def region(lines, name, source):
    start, end = f"// [{name}]", f"// [{name} end]"
    stripped = [line.strip() for line in lines]
    if stripped.count(start) != 1 or stripped.count(end) != 1:
        sys.exit(f"docs_snippet: {source} must hold '{start}' and '{end}' once each")
    first, last = stripped.index(start), stripped.index(end)
    if last < first:
        sys.exit(f"docs_snippet: {source}: '{end}' comes before '{start}'")
    return textwrap.dedent("\n".join(lines[first + 1:last])).splitlines()


def code_block(lines, heading, doc):
    if heading not in [line.strip() for line in lines]:
        sys.exit(f"docs_snippet: {doc} has no heading '{heading}'")
    at = [line.strip() for line in lines].index(heading)
    try:
        start = next(i for i in range(at + 1, len(lines)) if lines[i].strip() == "```cpp")
        end = next(i for i in range(start + 1, len(lines)) if lines[i].strip() == "```")
    except StopIteration:
        sys.exit(f"docs_snippet: {doc}: no complete ```cpp block after '{heading}'")
    return lines[start + 1:end]


def main():
    if len(sys.argv) < 5:
        sys.exit(__doc__)
    doc, heading, source, names = Path(sys.argv[1]), sys.argv[2], Path(sys.argv[3]), sys.argv[4:]
    source_lines = source.read_text().splitlines()
    want = []
    for name in names:
        if want:
            want.append("")
        want += region(source_lines, name, source)
    got = code_block(doc.read_text().splitlines(), heading, doc)
    for i in range(max(len(got), len(want))):
        g = got[i] if i < len(got) else "<end of block>"
        w = want[i] if i < len(want) else "<end of regions>"
        if g.rstrip() != w.rstrip():
            sys.exit(f"docs_snippet: line {i + 1} of the code block under '{heading}' in {doc} differs from "
                     f"{source}:\n  page:   {g}\n  source: {w}")
    print(f"docs_snippet: {doc} quotes {source} ({len(want)} lines)")


if __name__ == "__main__":
    main()
