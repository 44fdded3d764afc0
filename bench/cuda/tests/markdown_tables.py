"""Reading back the Markdown tables the summary scripts write, as a reader (or GitHub) would: a row
splits at each | that is not escaped, so a bare | inside a cell shows up as a row too wide."""
import re

PIPE = re.compile(r"(?<!\\)\|")


def cells(line):
    """The cells of one table row, stripped; an escaped \\| stays inside its cell."""
    return [c.strip() for c in PIPE.split(line.strip().strip("|"))]


def ragged_rows(text):
    """The table rows whose cell count differs from their table's header."""
    bad, width = [], None
    for line in text.splitlines():
        if not line.startswith("|"):
            width = None
            continue
        if width is None:
            width = len(cells(line))
        elif len(cells(line)) != width:
            bad.append(line)
    return bad
