"""MDL tokens and the cursor every block reader walks them with.

One regex pass splits the text into tokens: `"strings"`, `{`, `}`, `<=`, numbers, identifiers and,
so that nothing is silently dropped, any other single character (which no reader accepts, so it
becomes an error at its line and column). Whitespace, commas and colons are separators; `// ...`
and `/* ... */` comments vanish. Tokens are plain `str`s in a list (fast to build and to slice);
a token's character offset is recomputed only when an error needs it.

`Parser` is the cursor: typed reads (identifier, string, int, float32, vectors), bulk reads of
regular runs such as `{ x, y, z }` rows (checked by slicing the token list, converted with numpy),
and `error()`, which turns a problem into a `FormatError` whose `where` reads
"line 12, column 5 (in Geoset 2, Vertices)" and whose offset is the character offset.
"""

from __future__ import annotations

import math
import re
import struct

import numpy as np

from renderer.errors import Diagnostic, FormatError

_TOKEN = re.compile(
    r"""
    [\s,:]*                                    # separators, consumed with the token (fast)
    (?: //[^\n]*                               # line comment
      | /\*.*?\*/                              # block comment
      | ( [-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?(?:\#[A-Za-z]+\d*)?   # number (also MSVC 1.#INF00)
        | [{}]
        | [-+]?(?i:nan|inf(?:inity)?)(?![\w])   # nan / inf
        | [A-Za-z_][A-Za-z0-9_]*                # identifier
        | "[^"\n]*"                             # string (no escapes in MDL)
        | <=
        | [^\s,:]                               # anything else: kept so that it is reported
        )
    )
    """,
    re.X | re.S,
)

F32 = struct.Struct("<f")
I32_MIN, U32_END = -(1 << 31), 1 << 32
NUMBER_START = frozenset("0123456789-+.")


def tokenize(text: str) -> list[str]:
    return list(filter(None, _TOKEN.findall(text)))


def f32(x: float) -> float:
    """The float32 nearest to x, as a Python float (inf when out of range)."""
    try:
        return F32.unpack(F32.pack(x))[0]
    except OverflowError:
        return math.copysign(math.inf, x)


def is_number(tok: str | None) -> bool:
    if not tok:
        return False
    c = tok[0]
    if c in NUMBER_START:
        return True
    return tok.lower() in ("nan", "inf", "infinity")


def parse_float(tok: str) -> float:
    """A number token as a Python float; raises ValueError for anything else."""
    if tok[0] == '"' or tok in ("{", "}"):
        raise ValueError(tok)
    try:
        return float(tok)
    except ValueError:
        pass
    if "#" in tok:  # MSVC printf forms: 1.#INF00, -1.#IND00, 1.#QNAN0
        head, _, kind = tok.partition("#")
        neg = head.startswith("-")
        kind = kind.upper()
        if kind.startswith("INF"):
            return -math.inf if neg else math.inf
        if kind.startswith(("IND", "QNAN", "SNAN", "NAN")):
            return -math.nan if neg else math.nan
    raise ValueError(tok)


def parse_int(tok: str) -> int:
    try:
        return int(tok)
    except ValueError:
        v = parse_float(tok)
        if v.is_integer():
            return int(v)
        raise ValueError(tok) from None


class Parser:
    """A cursor over the tokens of one MDL text."""

    def __init__(self, text: str, path: str = "<text>"):
        self.text = text
        self.path = path
        self.toks = tokenize(text)
        self.n = len(self.toks)
        self.i = 0
        self.where: list[str] = []
        self.diagnostics: list[Diagnostic] = []

    # -- places and errors --------------------------------------------------------------------
    def offset(self, k: int) -> int:
        """Character offset of token k (len(text) past the last token)."""
        if k >= self.n:
            return len(self.text)
        seen = 0
        for m in _TOKEN.finditer(self.text):
            if m.group(1):
                if seen == k:
                    return m.start(1)
                seen += 1
        return len(self.text)

    def place(self, k: int | None = None) -> tuple[str, int]:
        k = self.i if k is None else k
        off = self.offset(k)
        line = self.text.count("\n", 0, off) + 1
        col = off - (self.text.rfind("\n", 0, off) + 1) + 1
        head = f"line {line}, column {col}" if k < self.n else f"end of text (line {line}, column {col})"
        if self.where:
            head += f" (in {', '.join(self.where)})"
        return head, off

    def error(self, problem: str, at: int | None = None) -> FormatError:
        where, off = self.place(at)
        return FormatError(self.path, where, off, problem, unit="character")

    def diag(self, message: str, at: int | None = None) -> None:
        where, off = self.place(at)
        self.diagnostics.append(Diagnostic(where, off, message, unit="character"))

    def describe(self, k: int) -> str:
        if k >= self.n:
            return "the end of the text"
        t = self.toks[k]
        if t == '"':
            return "an unterminated string"
        if t == "/":
            return "'/' (an unterminated /* comment or a stray slash)"
        if len(t) > 40:
            t = t[:37] + "..."
        return repr(t)

    def unexpected(self, wanted: str, at: int | None = None) -> FormatError:
        k = self.i if at is None else at
        return self.error(f"expected {wanted}, found {self.describe(k)}", k)

    # -- single tokens ------------------------------------------------------------------------
    def peek(self, ahead: int = 0) -> str | None:
        k = self.i + ahead
        return self.toks[k] if k < self.n else None

    def next(self, wanted: str = "more input") -> str:
        if self.i >= self.n:
            raise self.unexpected(wanted)
        t = self.toks[self.i]
        self.i += 1
        return t

    def expect(self, tok: str, wanted: str | None = None) -> None:
        if self.i >= self.n or self.toks[self.i] != tok:
            raise self.unexpected(wanted or repr(tok))
        self.i += 1

    def accept(self, tok: str) -> bool:
        if self.i < self.n and self.toks[self.i] == tok:
            self.i += 1
            return True
        return False

    def ident(self, wanted: str = "a keyword") -> str:
        t = self.peek()
        if t is None or not (t[0].isalpha() or t[0] == "_"):
            raise self.unexpected(wanted)
        self.i += 1
        return t

    def string(self, wanted: str = "a quoted string") -> str:
        t = self.peek()
        if t is None or len(t) < 2 or t[0] != '"':
            raise self.unexpected(wanted)
        self.i += 1
        return t[1:-1]

    def number(self, wanted: str = "a number") -> float:
        t = self.peek()
        try:
            v = parse_float(t)  # type: ignore[arg-type]
        except (ValueError, TypeError, IndexError):
            raise self.unexpected(wanted) from None
        self.i += 1
        return v

    def float32(self, wanted: str = "a number") -> float:
        return f32(self.number(wanted))

    def integer(self, wanted: str = "an integer", lo: int = I32_MIN, hi: int = U32_END - 1) -> int:
        t = self.peek()
        try:
            v = parse_int(t)  # type: ignore[arg-type]
        except (ValueError, TypeError, IndexError, OverflowError):
            raise self.unexpected(wanted) from None
        if not lo <= v <= hi:
            raise self.error(f"{wanted} is {v}, outside {lo}..{hi}")
        self.i += 1
        return v

    def u32(self, wanted: str = "an integer") -> int:
        """An unsigned 32-bit field; -1 and other negatives wrap (so `-1` means 0xFFFFFFFF)."""
        return self.integer(wanted) & 0xFFFFFFFF

    def i32(self, wanted: str = "an integer") -> int:
        """A signed 32-bit field; values 2**31.. wrap to negatives."""
        v = self.integer(wanted)
        return v - U32_END if v >= 1 << 31 else v

    def u8(self, wanted: str = "an integer 0..255") -> int:
        return self.integer(wanted, 0, 255)

    def vector(self, k: int, wanted: str = "vector") -> tuple:
        """`{ a, b, ... }` with exactly k numbers, as float32 Python floats."""
        self.expect("{", f"'{{' to start a {k}-number {wanted}")
        out = []
        for _ in range(k):
            if self.peek() == "}":
                raise self.error(f"{wanted} has {len(out)} numbers, expected {k}")
            out.append(self.float32(f"a number in the {wanted}"))
        self.expect("}", f"'}}' after {k} numbers of the {wanted}")
        return tuple(out)

    def int_vector(self, k: int, wanted: str, conv) -> tuple:
        self.expect("{", f"'{{' to start the {wanted}")
        out = []
        for _ in range(k):
            if self.peek() == "}":
                raise self.error(f"{wanted} has {len(out)} numbers, expected {k}")
            out.append(conv(f"an integer in the {wanted}"))
        self.expect("}", f"'}}' after {k} numbers of the {wanted}")
        return tuple(out)

    def rows(self, n: int, k: int, what: str, kind: str = "f") -> np.ndarray:
        """n rows `{ v1 .. vk }` then the closing '}' of the enclosing block.

        Returns an (n, k) float32 array (kind "f") or int64 array (kind "i"). The regular case is
        checked by slicing the token list; anything irregular goes through `_rows_slow`, which
        names the first wrong token.
        """
        stride = k + 2
        toks, i = self.toks, self.i
        end = i + n * stride
        sl = toks[i:end]
        if (
            end < self.n
            and toks[end] == "}"
            and sl[0::stride] == ["{"] * n
            and sl[k + 1 :: stride] == ["}"] * n
        ):
            cols = [
                self._convert(sl[c::stride], kind, what, i, lambda j, c=c: i + j * stride + c) for c in range(1, k + 1)
            ]
            self.i = end + 1
            return np.stack(cols, axis=1)
        return self._rows_slow(n, k, what, kind)

    def _rows_slow(self, n: int, k: int, what: str, kind: str) -> np.ndarray:
        vals: list = []
        for r in range(n):
            if self.peek() == "}":
                raise self.error(f"{what} declares {n} entries but the block ends after {r}")
            self.expect("{", f"'{{' to start entry {r} of {n} in {what}")
            for c in range(k):
                if self.peek() == "}":
                    raise self.error(f"entry {r} of {what} has {c} numbers, expected {k}")
                if kind == "f":
                    vals.append(self.number(f"a number in {what}"))
                else:
                    vals.append(self.integer(f"an integer in {what}"))
            self.expect("}", f"'}}' after {k} numbers in entry {r} of {what}")
        if self.peek() == "{":
            raise self.error(f"{what} declares {n} entries but holds more")
        self.expect("}", f"'}}' to close {what}")
        if kind == "f":
            with np.errstate(over="ignore", invalid="ignore"):
                return np.array(vals, dtype=np.float64).astype(np.float32).reshape(n, k)
        return np.array(vals, dtype=np.int64).reshape(n, k)

    def flat(self, what: str, kind: str = "i", count: int | None = None) -> np.ndarray:
        """Numbers up to the next '}' (consumed), e.g. `{ 0, 1, 2 }` after its '{'."""
        toks, i = self.toks, self.i
        try:
            end = toks.index("}", i)
        except ValueError:
            raise self.error(f"{what} is never closed (missing '}}')") from None
        sl = toks[i:end]
        if "{" in sl:
            raise self.error(f"expected a number in {what}, found '{{'", i + sl.index("{"))
        if count is not None and len(sl) != count:
            at = end if len(sl) < count else i + count
            raise self.error(f"{what} declares {count} numbers but holds {len(sl)}", at)
        arr = self._convert(sl, kind, what, i, lambda j: i + j)
        self.i = end + 1
        return arr

    def _convert(self, strs: list[str], kind: str, what: str, base: int, token_of) -> np.ndarray:
        if kind == "f":
            try:
                with np.errstate(over="ignore", invalid="ignore"):
                    return np.array(strs, dtype=np.float64).astype(np.float32)
            except (ValueError, TypeError):
                pass
            out = []
            for j, t in enumerate(strs):
                try:
                    out.append(parse_float(t))
                except ValueError:
                    raise self.unexpected(f"a number in {what}", token_of(j)) from None
            with np.errstate(over="ignore", invalid="ignore"):
                return np.array(out, dtype=np.float64).astype(np.float32)
        try:
            return np.array(strs, dtype=np.int64)
        except (ValueError, TypeError, OverflowError):
            pass
        out = []
        for j, t in enumerate(strs):
            try:
                v = parse_int(t)
            except (ValueError, OverflowError):
                raise self.unexpected(f"an integer in {what}", token_of(j)) from None
            if not I32_MIN <= v < U32_END:
                raise self.error(f"{v} in {what} is outside {I32_MIN}..{U32_END - 1}", token_of(j))
            out.append(v)
        return np.array(out, dtype=np.int64)

    def check_range(self, arr: np.ndarray, lo: int, hi: int, what: str, at: int, flat: bool = False) -> None:
        """Every value in lo..hi; else an error at `at` (at the bad value itself when `flat`: arr[j] is token at+j)."""
        if len(arr) and (int(arr.min()) < lo or int(arr.max()) > hi):
            j = int(np.flatnonzero(((arr < lo) | (arr > hi)).ravel())[0])
            raise self.error(f"{what} holds {int(arr.ravel()[j])}, outside {lo}..{hi}", at + j if flat else at)
