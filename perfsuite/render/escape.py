"""Text from files, git and users made safe for the place it is shown: one function per target.

- `terminal_text`: a terminal or a CI log. Control characters (NUL, ESC and the rest of C0 and C1, newlines
  included), lone surrogates, line and paragraph separators and bidirectional overrides are shown as escapes
  (`\\x1b`, `\\n`, `\\u202e`), and what a GitHub runner would read as a workflow command (`::error ...::` at the
  start of a line, `##[` anywhere) is broken up the same way, so a name can neither move the cursor, start a line,
  hide text nor post an annotation.
- `html_text`: an HTML element or attribute value: the same characters shown as escapes (tabs and newlines kept:
  they are whitespace there), then `&<>"'` as character references.
- `markdown_text`: a cell of a GitHub-flavoured Markdown table or a list item: the same characters shown as
  escapes, newlines included (a newline would end the row), HTML as character references (a job summary renders
  HTML), and the characters Markdown reads as syntax (`|` ends a cell, `*`, `` ` ``, `[`, `]`, `~`, `\\`, and `_`
  except between letters or digits) escaped with a backslash, so the cell reads as the text.
- `plot_text`: a label matplotlib draws: the same characters shown as escapes, and `$` escaped (a pair of them
  would start mathtext, whose parse error stops the drawing).

A renderer applies the one for its target to every name it shows. Sentences built for the terminal
(`verdict_message`, `ab_message`) are terminal text already (`terminal_text` changes nothing in its own output), and
a Markdown or HTML renderer escapes them again for its target, where the escapes read as written.
"""

from __future__ import annotations

import html
import re
import unicodedata

# Formatting characters that reorder the text around them (the "Trojan source" characters).
_BIDI_CONTROLS = frozenset("\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")
_UNSAFE_CATEGORIES = frozenset({"Cc", "Cs", "Zl", "Zp"})
_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}
_MARKDOWN_SYNTAX = re.compile(r"[\\`*\[\]|~]|_+")
# Underscores between letters or digits (`bert_base`) can neither open nor close emphasis, and stay as they are.
_INTRAWORD = re.compile(r"[^\W_]")
# A GitHub runner reads `::command ...::` after leading whitespace, and the older `##[command]` anywhere in a line.
_WORKFLOW_COMMAND_START = re.compile(r"^(\s*):(?=:)")
_LEGACY_WORKFLOW_COMMAND = re.compile(r"(?<=#)#(?=\[)")


def _unsafe(character: str) -> bool:
    return unicodedata.category(character) in _UNSAFE_CATEGORIES or character in _BIDI_CONTROLS


def _escaped(character: str) -> str:
    if character in _NAMED:
        return _NAMED[character]
    code = ord(character)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def _shown(text: str, keep: str = "") -> str:
    """`text` with every unsafe character but those in `keep` shown as an escape."""
    return "".join(_escaped(c) if _unsafe(c) and c not in keep else c for c in text)


def terminal_text(value: object) -> str:
    """`value` as text safe to print to a terminal or a CI log (one line: a newline shows as `\\n`)."""
    text = _shown(str(value))
    text = _WORKFLOW_COMMAND_START.sub(lambda found: found.group(1) + "\\x3a", text)
    return _LEGACY_WORKFLOW_COMMAND.sub(r"\\x23", text)


def html_text(value: object) -> str:
    """`value` as text safe inside HTML elements and quoted attribute values."""
    return html.escape(_shown(str(value), keep="\t\n"), quote=True)


def markdown_text(value: object) -> str:
    """`value` as text safe in a Markdown table cell or list item, reading as written."""
    text = html.escape(_shown(str(value)), quote=False)

    def escaped(found: re.Match[str]) -> str:
        run, (start, end) = found.group(), found.span()
        between = 0 < start and end < len(text) and all(_INTRAWORD.match(text[i]) for i in (start - 1, end))
        return run if run.startswith("_") and between else "".join(f"\\{c}" for c in run)

    return _MARKDOWN_SYNTAX.sub(escaped, text)


def plot_text(value: object) -> str:
    """`value` as a label matplotlib draws as written (no mathtext)."""
    return _shown(str(value)).replace("$", "\\$")
