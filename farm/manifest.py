"""Job manifests (TOML): what to render, checked strictly, every error naming its line.

    name = "nightly"                  # optional; names the job (letters, digits, . _ -)
    assets = ["textures"]             # asset roots, relative to this file
    size = "128x128"                  # or [128, 128]
    msaa = 0                          # 0, 1, 2, 4, 8 or 16
    background = "transparent"        # or "#rrggbb"
    camera = "auto"                   # auto | a CAMS camera name | ex,ey,ez:tx,ty,tz[:ux,uy,uz[:fov]]
    team = 0                          # team colour 0-27
    missing_textures = "checker"      # or "white"
    sequences = "all"                 # or names (and/or indices): ["Stand", "Walk"]
    timestamps = [0, "50%", "100%"]   # ms from the sequence start, or fractions of its length
    # every = 100                     # instead of timestamps: 0, 100, 200, ... up to the length

    [thresholds]                      # comparison thresholds, carried for the golden step
    min_ssim = 0.99                   # (aliases: ssim)
    pixel_delta = 16                  # (aliases: pixel_bound)
    max_pixels_over = 0.001

    [[thresholds.traces]]             # per trace: a glob over trace keys
    match = "crate.mdx|Death|*"
    min_ssim = 0.95

    [[models]]                        # or, with no per-model settings: models = ["models/**/*.mdx"]
    paths = ["models/**/*.mdx"]       # globs relative to this file (or `path = "one.mdx"`)
    sequences = ["Stand"]             # any setting above may be overridden per model
    thresholds = { min_ssim = 0.98 }

Every setting may be given at the top level (the job's default) and again in a `[[models]]`
entry, which wins for the files it matches. A file matched by several entries takes the settings
of the last one (like .gitattributes), so "everything, but this model at 256x256" is two entries.

Errors are `ManifestError`s: unknown keys (with a suggestion), wrong types, values out of range,
globs that match no file, asset roots that are not folders, TOML syntax. Each names the manifest
and the line of the offending key (tomllib gives no positions for values, so `key_lines` scans
the text for them).

Threshold keys are those of `farm.compare.Thresholds` (`min_ssim`, `pixel_delta`,
`max_pixels_over`); `ssim` and `pixel_bound` are accepted as aliases and stored under the
canonical names. Only the keys a manifest gives are carried (resolved per trace: job, then model,
then every matching `[[thresholds.traces]]` entry in order); the comparison fills in its defaults.
"""

from __future__ import annotations

import difflib
import glob
import math
import os
import re
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = [
    "MSAA_VALUES",
    "Manifest",
    "ManifestError",
    "ModelPlan",
    "TraceThresholds",
    "key_lines",
    "load_manifest",
    "parse_manifest",
]

MSAA_VALUES = (0, 1, 2, 4, 8, 16)
MAX_SIZE = 8192
MAX_TEAM = 27
THRESHOLD_ALIASES = {"ssim": "min_ssim", "pixel_bound": "pixel_delta"}
_THRESHOLD_RANGES = {  # used only when farm.compare is not importable
    "min_ssim": (-1.0, 1.0, False),
    "pixel_delta": (0, 255, True),
    "max_pixels_over": (0.0, 1.0, False),
}

# Render settings: allowed at the top level and in each [[models]] entry.
SETTINGS = ("assets", "size", "msaa", "background", "camera", "team", "missing_textures", "sequences",
            "timestamps", "every", "thresholds")
TOP_KEYS = ("name", "models", *SETTINGS)
MODEL_KEYS = ("path", "paths", *SETTINGS)
THRESHOLD_TABLE_KEYS = ("min_ssim", "pixel_delta", "max_pixels_over", *THRESHOLD_ALIASES)


class ManifestError(ValueError):
    """A manifest that cannot be used: names the file, the line (when known) and the problem."""

    def __init__(self, path: str | Path, line: int | None, message: str):
        self.path = str(path)
        self.line = line
        self.message = message
        super().__init__(self.sentence())

    def sentence(self) -> str:
        where = f"{self.path}:{self.line}" if self.line else self.path
        return f"{where}: {self.message}"


@dataclass(frozen=True)
class TraceThresholds:
    """A `[[thresholds.traces]]` entry: thresholds for the trace keys matching a glob."""

    match: str
    values: dict
    line: int | None = None


@dataclass
class ModelPlan:
    """One model file and the settings it is rendered with (after defaults and overrides)."""

    path: str  # absolute
    rel: str  # relative to the manifest's folder (POSIX separators): names the model in trace keys
    assets: tuple = ()
    width: int = 256
    height: int = 256
    msaa: int = 0
    background: str = "transparent"
    camera: str = "auto"
    team: int = 0
    missing_textures: str = "checker"
    sequences: Any = "all"  # "all" or a list of names / indices
    timestamps: tuple | None = (0,)  # ms (int) and fractions ("50%"); None when `every` is used
    every: int | None = None
    thresholds: dict = field(default_factory=dict)
    entry: int = 0  # which [[models]] entry (1-based) chose these settings
    line: int | None = None

    def to_dict(self) -> dict:
        return {
            "path": self.path, "rel": self.rel, "assets": list(self.assets), "width": self.width,
            "height": self.height, "msaa": self.msaa, "background": self.background, "camera": self.camera,
            "team": self.team, "missing_textures": self.missing_textures,
            "sequences": self.sequences if self.sequences == "all" else list(self.sequences),
            "timestamps": None if self.timestamps is None else list(self.timestamps), "every": self.every,
            "thresholds": dict(self.thresholds), "entry": self.entry, "line": self.line,
        }

    @classmethod
    def from_dict(cls, d: dict) -> ModelPlan:
        d = dict(d)
        d["assets"] = tuple(d.get("assets", ()))
        if d.get("timestamps") is not None:
            d["timestamps"] = tuple(d["timestamps"])
        return cls(**d)


@dataclass
class Manifest:
    path: str
    name: str
    plans: list[ModelPlan]
    trace_thresholds: list[TraceThresholds] = field(default_factory=list)
    text: str = ""
    shown_as: str = ""  # the path as the user gave it, for messages

    @property
    def root(self) -> Path:
        return Path(self.path).parent

    def line_of(self, *key) -> int | None:
        return _line(key_lines(self.text), key)


# --------------------------------------------------------------------------------------------
# Line numbers: tomllib gives none, so find each key's line by scanning the text.

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


def _line(lines: dict[tuple, int], key: tuple) -> int | None:
    """The line of `key`, or of the nearest enclosing key or table that has one."""
    key = tuple(key)
    while key:
        if key in lines:
            return lines[key]
        key = key[:-1]
    return None


# --------------------------------------------------------------------------------------------
# Parsing


class _Ctx:
    def __init__(self, path: Path, text: str):
        self.path = path
        self.text = text
        self.lines = key_lines(text)

    def error(self, key: tuple, message: str) -> ManifestError:
        return ManifestError(self.path, _line(self.lines, key), message)


def _where(key: tuple) -> str:
    """A readable name for a key path: `[[models]] #2: 'size'`, `'thresholds.min_ssim'`."""
    key = tuple(key)
    idx = max((i for i, p in enumerate(key) if isinstance(p, int)), default=None)
    if idx is None:
        return repr(".".join(key))
    head = f"[[{'.'.join(str(p) for p in key[:idx] if not isinstance(p, int))}]] #{key[idx] + 1}"
    rest = ".".join(str(p) for p in key[idx + 1:])
    return f"{head}: {rest!r}" if rest else head


def _type_name(value) -> str:
    return {bool: "boolean", int: "integer", float: "float", str: "string", list: "array", dict: "table"}.get(
        type(value), type(value).__name__)


def _check_keys(ctx: _Ctx, table: dict, known: tuple, key: tuple, what: str) -> None:
    for k in table:
        if k not in known:
            close = difflib.get_close_matches(k, known, n=1)
            hint = f"; did you mean {close[0]!r}?" if close else ""
            raise ctx.error((*key, k), f"unknown key {k!r} in {what}{hint} (known keys: {', '.join(known)})")


def _int(ctx: _Ctx, key: tuple, value, lo: int, hi: int | None = None, allowed=None) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ctx.error(key, f"{_where(key)} must be an integer, not {_type_name(value)} {value!r}")
    if allowed is not None and value not in allowed:
        raise ctx.error(key, f"{_where(key)} must be one of {', '.join(map(str, allowed))}, not {value}")
    if value < lo or (hi is not None and value > hi):
        rng = f"between {lo} and {hi}" if hi is not None else f"at least {lo}"
        raise ctx.error(key, f"{_where(key)} must be {rng}, not {value}")
    return value


def _str(ctx: _Ctx, key: tuple, value) -> str:
    if not isinstance(value, str):
        raise ctx.error(key, f"{_where(key)} must be a string, not {_type_name(value)} {value!r}")
    return value


def _size(ctx: _Ctx, key: tuple, value) -> tuple[int, int]:
    if isinstance(value, str):
        m = re.fullmatch(r"\s*(\d+)\s*[xX]\s*(\d+)\s*", value)
        if not m:
            raise ctx.error(key, f"{_where(key)} must look like \"512x512\" or [512, 512], not {value!r}")
        w, h = int(m.group(1)), int(m.group(2))
    elif isinstance(value, list):
        if len(value) != 2 or any(isinstance(v, bool) or not isinstance(v, int) for v in value):
            raise ctx.error(key, f"{_where(key)} must be two integers [width, height], not {value!r}")
        w, h = value
    else:
        raise ctx.error(key, f"{_where(key)} must be a string \"WxH\" or [width, height], not "
                             f"{_type_name(value)} {value!r}")
    if not (1 <= w <= MAX_SIZE and 1 <= h <= MAX_SIZE):
        raise ctx.error(key, f"{_where(key)} {w}x{h} is outside 1..{MAX_SIZE}")
    return w, h


def _background(ctx: _Ctx, key: tuple, value) -> str:
    value = _str(ctx, key, value)
    if value == "transparent":
        return value
    if not re.fullmatch(r"#[0-9a-fA-F]{6}", value):
        raise ctx.error(key, f"{_where(key)} must be \"transparent\" or \"#rrggbb\", not {value!r}")
    return value.lower()


def _camera(ctx: _Ctx, key: tuple, value) -> str:
    value = _str(ctx, key, value).strip()
    if not value or "|" in value:
        raise ctx.error(key, f"{_where(key)} must be \"auto\", a camera name or ex,ey,ez:tx,ty,tz[:ux,uy,uz[:fov]]"
                             f" (no '|'), not {value!r}")
    if re.fullmatch(r"[-+0-9.eE,:\s]+", value):  # looks explicit: check the numbers
        groups = value.split(":")
        ok = 2 <= len(groups) <= 4 and all(len(g.split(",")) == 3 for g in groups[:3])
        if ok and len(groups) == 4:
            ok = len(groups[3].split(",")) == 1
        try:
            if ok:
                [float(x) for g in groups for x in g.split(",")]
        except ValueError:
            ok = False
        if not ok:
            raise ctx.error(key, f"{_where(key)}: an explicit camera is ex,ey,ez:tx,ty,tz[:ux,uy,uz[:fov]],"
                                 f" not {value!r}")
    return value


def _sequences(ctx: _Ctx, key: tuple, value):
    if value == "all":
        return "all"
    if isinstance(value, str):
        raise ctx.error(key, f"{_where(key)} must be \"all\" or a list of names, not {value!r}"
                             f" (write [{value!r}] for one sequence)")
    if not isinstance(value, list) or not value:
        raise ctx.error(key, f"{_where(key)} must be \"all\" or a non-empty list of sequence names, not "
                             f"{_type_name(value)} {value!r}")
    out = []
    for i, v in enumerate(value):
        if isinstance(v, bool) or not isinstance(v, (str, int)) or (isinstance(v, int) and v < 0):
            raise ctx.error(key, f"{_where(key)}[{i}] must be a sequence name (or index >= 0), not "
                                 f"{_type_name(v)} {v!r}")
        if isinstance(v, str) and (not v.strip() or "|" in v):
            raise ctx.error(key, f"{_where(key)}[{i}]: {v!r} is not a usable sequence name")
        if v not in out:
            out.append(v)
    return out


_FRACTION = re.compile(r"\s*(\d+(?:\.\d*)?|\.\d+)\s*%\s*")


def _timestamps(ctx: _Ctx, key: tuple, value) -> tuple:
    if not isinstance(value, list) or not value:
        raise ctx.error(key, f"{_where(key)} must be a non-empty list of ms (integers) and/or fractions of the"
                             f" sequence such as \"50%\", not {_type_name(value)} {value!r}")
    out = []
    for i, v in enumerate(value):
        if isinstance(v, int) and not isinstance(v, bool):
            if v < 0:
                raise ctx.error(key, f"{_where(key)}[{i}] must be >= 0 ms, not {v}")
            out.append(v)
        elif isinstance(v, str):
            m = _FRACTION.fullmatch(v)
            if not m or not 0.0 <= float(m.group(1)) <= 100.0:
                raise ctx.error(key, f"{_where(key)}[{i}] must be a fraction from \"0%\" to \"100%\", not {v!r}")
            out.append(f"{float(m.group(1)):g}%")
        else:
            raise ctx.error(key, f"{_where(key)}[{i}] must be an integer (ms) or a fraction such as \"50%\", not"
                                 f" {_type_name(v)} {v!r}")
    return tuple(dict.fromkeys(out))


def _canonical_thresholds(ctx: _Ctx, key: tuple, table: dict, extra: tuple = ()) -> dict:
    out = {}
    for k, v in table.items():
        if k in extra:
            continue
        if k not in THRESHOLD_TABLE_KEYS:
            known = THRESHOLD_TABLE_KEYS + extra
            close = difflib.get_close_matches(k, known, n=1)
            hint = f"; did you mean {close[0]!r}?" if close else ""
            raise ctx.error((*key, k), f"unknown threshold {k!r} in {_where(key)}{hint} (known: {', '.join(known)})")
        name = THRESHOLD_ALIASES.get(k, k)
        if name in out:
            raise ctx.error((*key, k), f"{_where(key)} gives {name!r} twice (once as {k!r})")
        out[name] = v
    _validate_thresholds(ctx, key, out, table)
    return out


def _validate_thresholds(ctx: _Ctx, key: tuple, values: dict, table: dict) -> None:
    """Check the values as the comparison will (farm.compare.Thresholds when it is importable)."""
    reverse = {v: k for k, v in THRESHOLD_ALIASES.items()}

    def original(name: str) -> str:
        return name if name in table else reverse.get(name, name)

    try:
        from farm.compare import Thresholds
    except ImportError:  # the comparison is optional at this layer; same rules, kept here
        Thresholds = None
    for name, v in values.items():
        lo, hi, integer = _THRESHOLD_RANGES[name]
        ok_type = isinstance(v, int) if integer else isinstance(v, (int, float))
        if isinstance(v, bool) or not ok_type:
            kind = "an integer" if integer else "a number"
            raise ctx.error((*key, original(name)), f"threshold {original(name)!r} in {_where(key)} must be {kind},"
                                                     f" not {_type_name(v)} {v!r}")
        if not (math.isfinite(v) and lo <= v <= hi):
            raise ctx.error((*key, original(name)), f"threshold {original(name)!r} in {_where(key)} must be between"
                                                     f" {lo:g} and {hi:g}, not {v!r}")
    if Thresholds is not None:
        try:
            Thresholds.from_dict(values)
        except ValueError as e:
            raise ctx.error(key, f"{_where(key)}: {e}") from None


def _assets(ctx: _Ctx, key: tuple, value, root: Path) -> tuple:
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or any(not isinstance(v, str) for v in value):
        raise ctx.error(key, f"{_where(key)} must be a list of folders, not {_type_name(value)} {value!r}")
    out = []
    for v in value:
        p = (root / v).resolve()
        if not p.is_dir():
            raise ctx.error(key, f"{_where(key)}: asset root {v!r} is not a folder (looked for {p})")
        out.append(str(p))
    return tuple(out)


def _settings(ctx: _Ctx, table: dict, key: tuple, root: Path) -> dict:
    """Validate the render settings present in `table`; returns {name: value} for those given."""
    s: dict[str, Any] = {}
    if "assets" in table:
        s["assets"] = _assets(ctx, (*key, "assets"), table["assets"], root)
    if "size" in table:
        s["width"], s["height"] = _size(ctx, (*key, "size"), table["size"])
    if "msaa" in table:
        s["msaa"] = _int(ctx, (*key, "msaa"), table["msaa"], 0, 16, allowed=MSAA_VALUES)
    if "background" in table:
        s["background"] = _background(ctx, (*key, "background"), table["background"])
    if "camera" in table:
        s["camera"] = _camera(ctx, (*key, "camera"), table["camera"])
    if "team" in table:
        s["team"] = _int(ctx, (*key, "team"), table["team"], 0, MAX_TEAM)
    if "missing_textures" in table:
        v = _str(ctx, (*key, "missing_textures"), table["missing_textures"])
        if v not in ("checker", "white"):
            raise ctx.error((*key, "missing_textures"), f"{_where((*key, 'missing_textures'))} must be \"checker\""
                                                        f" or \"white\", not {v!r}")
        s["missing_textures"] = v
    if "sequences" in table:
        s["sequences"] = _sequences(ctx, (*key, "sequences"), table["sequences"])
    if "timestamps" in table and "every" in table:
        later = max(("timestamps", "every"), key=lambda k: _line(ctx.lines, (*key, k)) or 0)
        raise ctx.error((*key, later), f"{_where(key) if key else 'the manifest'} gives both 'timestamps' and"
                                       f" 'every'; use one")
    if "timestamps" in table:
        s["timestamps"] = _timestamps(ctx, (*key, "timestamps"), table["timestamps"])
        s["every"] = None
    if "every" in table:
        s["every"] = _int(ctx, (*key, "every"), table["every"], 1)
        s["timestamps"] = None
    if "thresholds" in table:
        t = table["thresholds"]
        if not isinstance(t, dict):
            raise ctx.error((*key, "thresholds"), f"{_where((*key, 'thresholds'))} must be a table, not"
                                                  f" {_type_name(t)} {t!r}")
        extra = ("traces",) if not key else ()
        s["thresholds"] = _canonical_thresholds(ctx, (*key, "thresholds"), t, extra)
    return s


def _trace_thresholds(ctx: _Ctx, table: dict) -> list[TraceThresholds]:
    entries = table.get("traces", [])
    key = ("thresholds", "traces")
    if not isinstance(entries, list) or any(not isinstance(e, dict) for e in entries):
        raise ctx.error(key, "thresholds.traces must be an array of tables ([[thresholds.traces]]) with 'match'")
    out = []
    for i, e in enumerate(entries):
        k = (*key, i)
        if "match" not in e:
            raise ctx.error(k, f"{_where(k)} needs 'match', a glob over trace keys such as \"crate.mdx|Stand|*\"")
        match = _str(ctx, (*k, "match"), e["match"])
        values = _canonical_thresholds(ctx, k, e, extra=("match",))
        if not values:
            raise ctx.error(k, f"{_where(k)} gives no threshold (known: {', '.join(THRESHOLD_TABLE_KEYS)})")
        out.append(TraceThresholds(match, values, _line(ctx.lines, k)))
    return out


def _model_files(ctx: _Ctx, key: tuple, entry: dict, root: Path) -> list[Path]:
    if "path" in entry and "paths" in entry:
        raise ctx.error((*key, "paths"), f"{_where(key)} gives both 'path' and 'paths'; use one")
    if "path" in entry:
        patterns = [(_str(ctx, (*key, "path"), entry["path"]), (*key, "path"))]
    elif "paths" in entry:
        v = entry["paths"]
        if isinstance(v, str):
            v = [v]
        if not isinstance(v, list) or not v or any(not isinstance(p, str) for p in v):
            raise ctx.error((*key, "paths"), f"{_where((*key, 'paths'))} must be a non-empty list of paths or globs,"
                                             f" not {_type_name(v)} {v!r}")
        patterns = [(p, (*key, "paths")) for p in v]
    else:
        raise ctx.error(key, f"{_where(key)} needs 'path' (one file) or 'paths' (files and globs, relative to"
                             f" the manifest)")
    files: list[Path] = []
    for pattern, k in patterns:
        full = pattern if os.path.isabs(pattern) else str(root / pattern)
        if glob.has_magic(pattern):
            found = sorted(Path(p) for p in glob.glob(full, recursive=True) if os.path.isfile(p))
        else:
            found = [Path(full)] if os.path.isfile(full) else []
        if not found:
            what = "glob" if glob.has_magic(pattern) else "path"
            raise ctx.error(k, f"{_where(k)}: {what} {pattern!r} matches no file (relative to {root})")
        files.extend(p for p in found if p not in files)
    return files


def _rel(path: Path, root: Path) -> str:
    try:
        return path.resolve().relative_to(root.resolve()).as_posix()
    except ValueError:
        return Path(os.path.relpath(path.resolve(), root.resolve())).as_posix()


def parse_manifest(text: str, path: str | Path = "<manifest>") -> Manifest:
    """Parse and check a manifest's text; paths are relative to `path`'s folder."""
    path = Path(path)
    root = path.parent.resolve()
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        m = re.search(r"\(at line (\d+), column \d+\)", str(e))
        msg = re.sub(r"\s*\(at line \d+, column \d+\)", "", str(e))
        raise ManifestError(path, int(m.group(1)) if m else None, f"TOML syntax: {msg}") from None
    ctx = _Ctx(path, text)
    _check_keys(ctx, data, TOP_KEYS, (), "the manifest")
    name = data.get("name", path.stem)
    name = _str(ctx, ("name",), name)
    if not re.fullmatch(r"[A-Za-z0-9._-]{1,64}", name):
        raise ctx.error(("name",), f"'name' must be 1-64 letters, digits, '.', '_' or '-', not {name!r}")
    defaults = _settings(ctx, data, (), root)
    trace_thresholds = _trace_thresholds(ctx, data["thresholds"]) if isinstance(data.get("thresholds"), dict) else []
    models = data.get("models")
    if models is None:
        raise ManifestError(path, None, "no [[models]]: a manifest names at least one model (path or glob)")
    if isinstance(models, list) and models and all(isinstance(m, str) for m in models):
        models = [{"paths": models}]  # shorthand: models = ["a.mdx", "units/**/*.mdx"]
    if not isinstance(models, list) or not models or any(not isinstance(m, dict) for m in models):
        raise ctx.error(("models",), "'models' must be a list of paths/globs or an array of tables: "
                                     "write [[models]] with 'path' or 'paths'")
    chosen: dict[Path, ModelPlan] = {}
    for i, entry in enumerate(models):
        key = ("models", i)
        _check_keys(ctx, entry, MODEL_KEYS, key, f"[[models]] #{i + 1}")
        files = _model_files(ctx, key, entry, root)
        own = _settings(ctx, entry, key, root)
        settings = {**defaults, **own}
        settings["assets"] = tuple(dict.fromkeys((*defaults.get("assets", ()), *own.get("assets", ()))))
        settings["thresholds"] = {**defaults.get("thresholds", {}), **own.get("thresholds", {})}
        for f in files:
            resolved = f.resolve()
            chosen.pop(resolved, None)  # the last entry matching a file wins (and orders it)
            chosen[resolved] = ModelPlan(path=str(resolved), rel=_rel(f, root), entry=i + 1,
                                         line=_line(ctx.lines, key), **settings)
    return Manifest(path=str(path.resolve()) if path.exists() else str(path), name=name,
                    plans=sorted(chosen.values(), key=lambda p: p.rel), trace_thresholds=trace_thresholds, text=text,
                    shown_as=str(path))


def load_manifest(path: str | Path) -> Manifest:
    path = Path(path)
    try:
        raw = path.read_bytes()
    except OSError as e:
        raise ManifestError(path, None, f"cannot read the manifest: {e.strerror or e}") from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise ManifestError(path, raw[: e.start].count(b"\n") + 1, "the manifest is not UTF-8 text") from None
    return parse_manifest(text, path)
