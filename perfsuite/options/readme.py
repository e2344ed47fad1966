"""The README's table of options, made from their declarations (the fields of perfsuite.options.settings.Settings):
one row per option with its `--perf-*` flag and the help text `pytest --help` prints, so the README cannot name an
option that does not exist, miss one, or describe one otherwise than its help.

`python -m perfsuite.options.readme [README.md]` writes the table between its two marker lines; a test checks that
the README's table is this one.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from perfsuite.options.settings import OPTIONS, Option

BEGIN = "<!-- options: made from perfsuite/options/settings.py by python -m perfsuite.options.readme -->"
END = "<!-- end of options -->"


def options_table(options: Sequence[Option[Any]] = OPTIONS) -> str:
    """The Markdown table of `options`, in their declared order, between the marker lines."""
    rows = [f"| `{option.flag}` | {cell(option.help.replace('%%', '%'))} |" for option in options]
    return "\n".join([BEGIN, "| option | what it takes (and its default) |", "|---|---|", *rows, "", END])


def cell(text: str) -> str:
    """`text` as one cell of a Markdown table: its pipes escaped."""
    return text.replace("|", "\\|")


def readme_table(readme_text: str) -> str | None:
    """The options table of a README's text, markers included, or None where it has no pair of markers."""
    if BEGIN not in readme_text or END not in readme_text.split(BEGIN, 1)[1]:
        return None
    return BEGIN + readme_text.split(BEGIN, 1)[1].split(END, 1)[0] + END


def main(argv: Sequence[str]) -> int:
    """Write the options table into the README named by `argv` (README.md by default); 1 where it has no markers."""
    readme = Path(argv[0] if argv else "README.md")
    text = readme.read_text(encoding="utf-8")
    current = readme_table(text)
    if current is None:
        print(f"{readme}: no options table to replace; put the lines {BEGIN} and {END} where it goes", file=sys.stderr)
        return 1
    readme.write_text(text.replace(current, options_table()), encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
