"""Where a key is in a TOML text: tomllib gives no positions, so `key_lines` scans the text for
each key path's line (tables, arrays of tables, dotted and inline keys; multi-line strings and
arrays skipped), and `line_of` finds the line of a key or of the nearest enclosing one. The
manifest (farm.plan.manifest) places every error with them."""

from __future__ import annotations

import re

__all__ = ["key_lines", "line_of"]

_BARE = r"[A-Za-z0-9_-]+"
_BASIC = r'"(?:[^"\\]|\\.)*"'
_LITERAL = r"'[^']*'"
_KEY_PART = rf"(?:{_BARE}|{_BASIC}|{_LITERAL})"
_DOTTED = rf"{_KEY_PART}(?:\s*\.\s*{_KEY_PART})*"
_KEY_LINE = re.compile(rf"\s*({_DOTTED})\s*=")
_HEADER = re.compile(rf"\s*(\[\[?)\s*({_DOTTED})\s*\]\]?")
_INLINE_KEY = re.compile(rf"[{{,]\s*({_DOTTED})\s*=")


def _split_key(dotted: str) -> tuple[str, ...]:
    parts = re.findall(_KEY_PART, dotted)
    out = []
    for p in parts:
        if p.startswith('"'):
            p = p[1:-1].encode("utf-8").decode("unicode_escape")
        elif p.startswith("'"):
            p = p[1:-1]
        out.append(p)
    return tuple(out)


def key_lines(text: str) -> dict[tuple, int]:
    """Map key paths to the 1-based line that defines them.

    Paths use the key names, with the 0-based index of each array-of-tables element:
    ``("models", 1, "size")`` is `size` in the second `[[models]]`. Table headers map too
    (``("models", 1)``), and keys inside one-line inline tables (``("models", 1, "thresholds",
    "min_ssim")``). Lines inside multi-line strings are skipped.
    """
    lines: dict[tuple, int] = {}
    counts: dict[tuple, int] = {}  # array-of-tables path (resolved prefix + name) -> elements so far
    current: tuple = ()
    in_string: str | None = None
    depth = 0  # open brackets of a multi-line array value
    for no, raw in enumerate(text.splitlines(), 1):
        line = raw
        if depth:
            depth = max(0, depth + _bracket_balance(line))
            continue
        if in_string:
            if in_string in line:
                line = line.split(in_string, 1)[1]
                in_string = None
            else:
                continue
        m = _HEADER.match(line)
        if m and not _KEY_LINE.match(line):
            parts = _split_key(m.group(2))
            resolved: tuple = ()
            for i, part in enumerate(parts):
                resolved = (*resolved, part)
                last = i == len(parts) - 1
                if last and m.group(1) == "[[":
                    n = counts.get(resolved, 0)
                    counts[resolved] = n + 1
                    resolved = (*resolved, n)
                elif resolved in counts:
                    resolved = (*resolved, counts[resolved] - 1)
            current = resolved
            lines.setdefault(current, no)
            continue
        m = _KEY_LINE.match(line)
        if m:
            path = (*current, *_split_key(m.group(1)))
            lines.setdefault(path, no)
            rest = line[m.end():]
            if rest.lstrip().startswith("{"):
                for im in _INLINE_KEY.finditer(rest):
                    lines.setdefault((*path, *_split_key(im.group(1))), no)
            for quote in ('"""', "'''"):
                if rest.count(quote) % 2 == 1:
                    in_string = quote
            if not in_string:
                depth = max(0, _bracket_balance(rest))
    return lines


def _bracket_balance(text: str) -> int:
    """Opening minus closing brackets outside strings and comments (for multi-line arrays)."""
    n, quote, i = 0, None, 0
    while i < len(text):
        c = text[i]
        if quote:
            if c == "\\" and quote == '"':
                i += 1
            elif c == quote:
                quote = None
        elif c in "\"'":
            quote = c
        elif c == "#":
            break
        elif c in "[{":
            n += 1
        elif c in "]}":
            n -= 1
        i += 1
    return n


def line_of(lines: dict[tuple, int], key: tuple) -> int | None:
    """The line of `key`, or of the nearest enclosing key or table that has one."""
    key = tuple(key)
    while key:
        if key in lines:
            return lines[key]
        key = key[:-1]
    return None
