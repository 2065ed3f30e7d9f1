"""Escaping for each medium a name from a user's file reaches, one function per medium, and nowhere
else (issue 34 item 3). Every name (a model's path, an archive entry, a texture path, a sequence) may
be hostile: it can hold ESC sequences that drive a terminal, NUL bytes no XML can carry, markup.

- terminal: `terminal(text)` shows every control character as its escape (`\\x1b`, `\\x00`, `\\x85`,
  `\\u202e`): C0 but tab, DEL, C1, the bidirectional overrides and isolates, the line and paragraph
  separators, and a lone surrogate (a byte that was not UTF-8, `\\udcff`). `keep_lines=True` keeps
  newlines (a whole printed text, not one name). The command line writes stdout and stderr through
  `TerminalStream` (farm/cli/__init__.main), so whatever prints (lists, errors, warnings, log lines)
  reaches the terminal escaped; binary output (`-o -`) goes to the stream's buffer, untouched.
- HTML: Jinja2's autoescape for markup, and `html_finalize` (the environments' `finalize`) for the
  control characters HTML cannot show (a NUL is a parse error): every `{{ value }}` of the report and
  of thumbnails' index.html passes through it.
- Markdown: `markdown(text)`: HTML-escaped, Markdown's punctuation as character references, control
  characters visible, one line (farm/report/markdown.md_text).
- JUnit XML: `xml(text)`: XML 1.0 cannot carry NUL, most C0 controls, U+FFFE/U+FFFF or a lone
  surrogate, not even as references; they are shown as their escapes (`\\x00`), the rest is left to
  ElementTree's own escaping (farm/report/junit.py).
- JSON: the encoder's own escaping, `farm.files.json_bytes` (every C0 control as `\\u001b`; a lone
  surrogate as `\\udcff`, which reads back as the same string); nothing to add here.
"""

from __future__ import annotations

import html
import io
import re

from markupsafe import Markup

__all__ = ["TerminalStream", "html_finalize", "markdown", "terminal", "visible", "xml"]

# What a terminal acts on or reorders (tab and newline aside): C0, DEL, C1, bidi controls, separators
_TERMINAL = "\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028-\u202e\u2066-\u2069\ud800-\udfff"
_TERMINAL_NAME = re.compile(f"[{_TERMINAL}\t\n]")
_TERMINAL_TEXT = re.compile(f"[{_TERMINAL}]")
# What XML 1.0 cannot carry at all (https://www.w3.org/TR/xml/#charsets), and a terminal's own
_XML = re.compile(f"[\x00-\x08\x0b\x0c\x0e-\x1f\ufffe\uffff{_TERMINAL}]")
_MD = {c: f"&#{ord(c)};" for c in "|`[]()!*_~\\"}
_MD_RE = re.compile("[" + re.escape("".join(_MD)) + "]")


def visible(char: str) -> str:
    """One character as its escape: `\\x1b` below U+0100, `\\u202e` above."""
    code = ord(char)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def terminal(text, keep_lines: bool = False) -> str:
    """`text` safe to print: control characters shown as their escapes (newlines too, unless
    `keep_lines`: then only what is not a line break or a tab)."""
    s = "" if text is None else str(text)
    return (_TERMINAL_TEXT if keep_lines else _TERMINAL_NAME).sub(lambda m: visible(m.group(0)), s)


def xml(text) -> str:
    """`text` that XML 1.0 can carry (ElementTree escapes `<`, `&` and quotes itself)."""
    return _XML.sub(lambda m: visible(m.group(0)), "" if text is None else str(text))


def markdown(text) -> str:
    """`text` as inert Markdown/HTML text on one line (GitHub renders summary.md's HTML too)."""
    s = html.escape(terminal(text), quote=True)
    return _MD_RE.sub(lambda m: _MD[m.group(0)], s)


def html_finalize(value):
    """Jinja2's `finalize` for HTML pages: a string's control characters shown as escapes before
    autoescape escapes its markup; markup the templates made (Markup) and other values as they are."""
    if type(value) is str:  # the common case first: a report has millions of these
        return _TERMINAL_TEXT.sub(_visible_match, value) if _TERMINAL_TEXT.search(value) else value
    if isinstance(value, str) and not isinstance(value, Markup):
        return terminal(value, keep_lines=True)
    return value


def _visible_match(m: re.Match) -> str:
    return visible(m.group(0))


class TerminalStream(io.TextIOBase):
    """A text stream that writes to `target` with `terminal(text, keep_lines=True)`: what the
    command line prints reaches the terminal escaped. `buffer` and `fileno` are the target's, for
    binary output (`farm render -o -`)."""

    def __init__(self, target):
        self.target = target

    def writable(self) -> bool:
        return True

    def write(self, text: str) -> int:
        self.target.write(terminal(text, keep_lines=True))
        return len(text)

    def flush(self) -> None:
        self.target.flush()

    def fileno(self) -> int:
        return self.target.fileno()

    def isatty(self) -> bool:
        return self.target.isatty()

    @property
    def buffer(self):
        return self.target.buffer

    @property
    def encoding(self):
        return getattr(self.target, "encoding", "utf-8")

    @property
    def errors(self):
        return getattr(self.target, "errors", "strict")
