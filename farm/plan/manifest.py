"""Job manifests (TOML): what to render, checked strictly, every error naming its line.

    name = "nightly"                  # optional; names the job (letters, digits, . _ -)
    assets = ["textures"]             # asset roots, relative to this file
    size = "128x128"                  # or [128, 128]
    msaa = 0                          # 0, 1, 2, 4, 8 or 16
    background = "transparent"        # or "#rrggbb"
    camera = "auto"                   # auto | a CAMS camera name | ex,ey,ez:tx,ty,tz[:ux,uy,uz[:fov]]
    team = 0                          # team colour 0-27
    missing_textures = "checker"      # or "white"
    # background_alpha = 255          # 0-255: the opacity of a "#rrggbb" background
    sequences = "all"                 # or names (and/or indices): ["Stand", "Walk"]
    # sequences = ["Portrait", "Stand", "first"]   # a fallback: the first of these the model has
    timestamps = [0, "50%", "100%"]   # ms from the sequence start, or fractions of its length (the
                                      # trace key names the fraction: ...|Stand|50%|..., so it stays
                                      # the same trace when the sequence's length changes)
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
and the line of the offending key (tomllib gives no positions for values, so
farm.plan.toml_lines.key_lines scans the text for them). When the job is planned
(farm.plan.batches.expand_manifest, before anything renders), a sequence named here that a
matched model does not have is one too, at the line of the
`sequences` entry that applies, naming each model that lacks it and the nearest names it has
(`Manifest.unknown_sequences`).

Sequences: ``"all"``, or a list of names/indices, each rendered. A list that ends with the keyword
``"first"`` asks for a fallback instead, like `farm thumbnails` (Portrait, else Stand, else the
first): one sequence per model, the first entry the model has, else its first sequence (its bind
pose when it has none). The list is resolved when the job is planned, from the model that planning
reads anyway (farm.plan.batches.expand_plan, `resolve_fallback`; a `ModelPlan` reads no file;
`sequence_fallback` keeps the list, so `farm retry` resolves it again); a model
that cannot be read keeps the first entry, and its frames fail as planned with the loader's
sentence ("<model> does not load: ..."; nothing renders them). A list without "first" names
sequences every matched model must have. (A sequence that is really named "first" is named by
its index in such a list.)

Render settings are checked by farm.settings (the rules the command line and thumbnails use too).
Threshold keys are those of `farm.compare.Thresholds` (`min_ssim`, `pixel_delta`,
`max_pixels_over`); `ssim` and `pixel_bound` are accepted as aliases and stored under the
canonical names. Only the keys a manifest gives are carried (resolved per trace: job, then model,
then every matching `[[thresholds.traces]]` entry in order); the comparison fills in its defaults.
"""

from __future__ import annotations

import difflib
import glob
import os
import re
import tomllib
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

from farm.plan.keys import percent_text
from farm.plan.thresholds import Thresholds
from farm.plan.toml_lines import key_lines, line_of
from farm.settings import (
    RENDER_SETTINGS,
    RenderSettings,
    SettingError,
    check_int,
    check_missing_policy,
    check_time,
    type_name,
)
from renderer.anim import find_sequence
from renderer.assets import MpqError, list_models, split_source

__all__ = [
    "Manifest",
    "ManifestError",
    "ModelPlan",
    "TraceThresholds",
    "load_manifest",
    "parse_manifest",
]

THRESHOLD_ALIASES = {"ssim": "min_ssim", "pixel_bound": "pixel_delta"}

# Render settings (farm.settings.RENDER_SETTINGS) and the plan's: allowed at the top level and in each [[models]] entry.
SETTINGS = (*(s.name for s in RENDER_SETTINGS), "missing", "sequences", "timestamps", "every", "thresholds")
TOP_KEYS = ("name", "models", "listfile", *SETTINGS)
MODEL_KEYS = ("path", "paths", *SETTINGS)
THRESHOLD_TABLE_KEYS = (*Thresholds.keys(), *THRESHOLD_ALIASES)


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


FIRST = "first"  # the last entry of a sequence fallback list: the model's first sequence


def resolve_fallback(model, chain: list) -> list:
    """The one sequence a fallback list picks for `model` (loaded when the job is planned; None when
    it cannot be read): [index] of the first entry it has (names case-insensitively, or indices), [0]
    for "first", [None] (bind pose) when the model has no sequences; for a model that cannot be read,
    [the first entry] (its frames fail as planned)."""
    if model is None:
        return [0 if chain[0] == FIRST else chain[0]]
    for entry in chain:
        if entry == FIRST:
            return [0] if model.sequences else [None]
        try:
            return [find_sequence(model, entry)]
        except ValueError:
            continue
    return [0] if model.sequences else [None]


@dataclass
class ModelPlan:
    """One model file and the settings it is rendered with (after defaults and overrides)."""

    path: str  # absolute
    rel: str  # relative to the manifest's folder (POSIX separators): names the model in trace keys
    settings: RenderSettings = field(default_factory=RenderSettings)
    sequences: Any = "all"  # "all" or a list of names / indices
    timestamps: tuple | None = (0,)  # ms (int) and fractions ("50%"); None when `every` is used
    every: int | None = None
    thresholds: dict = field(default_factory=dict)
    entry: int = 0  # which [[models]] entry (1-based) chose these settings
    line: int | None = None
    root: str | None = None  # the manifest's folder when it holds the model: the texture search stops there
    missing: str = "warn"  # "warn" or "fail": a frame rendered with a missing asset (farm.settings)
    sequence_fallback: list | None = None  # ["Stand", "first"]: the list `sequences` was resolved from

    def __post_init__(self):  # no I/O: the fallback is resolved where the model is read (expand_plan)
        if self.sequence_fallback is None and isinstance(self.sequences, (list, tuple)) \
                and FIRST in self.sequences:
            self.sequence_fallback = list(self.sequences)

    def to_dict(self) -> dict:
        d = {
            "path": self.path, "rel": self.rel, **self.settings.to_dict(),
            "sequences": self.sequences if self.sequences == "all" else list(self.sequences),
            "timestamps": None if self.timestamps is None else list(self.timestamps), "every": self.every,
            "thresholds": dict(self.thresholds), "entry": self.entry, "line": self.line,
            **({"root": self.root} if self.root else {}),
            **({"missing": self.missing} if self.missing != "warn" else {}),
        }
        if self.sequence_fallback:
            d["sequence_fallback"] = list(self.sequence_fallback)
        return d

    @classmethod
    def from_dict(cls, d: dict) -> ModelPlan:
        settings, rest = RenderSettings.split(d)
        if rest.get("timestamps") is not None:
            rest["timestamps"] = tuple(rest["timestamps"])
        return cls(**rest, settings=settings)


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

    @cached_property
    def lines(self) -> dict[tuple, int]:
        """The line of each key of `text` (farm.plan.toml_lines.key_lines), scanned once."""
        return key_lines(self.text)

    def line_of(self, *key) -> int | None:
        return line_of(self.lines, key)

    def sequences_key(self, plan: ModelPlan) -> tuple:
        """The key of the `sequences` entry that applies to `plan`: its [[models]] entry's, else the job's."""
        own = ("models", plan.entry - 1, "sequences")
        return own if own in self.lines else ("sequences",)

    def unknown_sequences(self, plans: list[ModelPlan], unknown: dict[str, list]) -> ManifestError:
        """The error for sequences named here that models do not have (`unknown`: model rel -> [(the
        name or index asked for, the names the model has)]), placed at the first such `sequences`
        entry, naming each model it matched that lacks one, with the nearest names it has."""
        lines = self.lines
        by_key: dict[tuple, list[str]] = {}
        for plan in plans:
            for asked, names in unknown.get(plan.rel, ()):
                lack = f"{plan.rel} has no {asked!r} ({_nearest(asked, names)})"
                by_key.setdefault(self.sequences_key(plan), []).append(lack)
        key = min(by_key, key=lambda k: line_of(lines, k) or 0)
        lacks = by_key[key]
        shown = "; ".join(lacks[:5]) + (f"; and {len(lacks) - 5} more" if len(lacks) > 5 else "")
        who = "a model matched here does" if len(lacks) == 1 else f"{len(lacks)} models matched here do"
        hint = "" if len(lacks) == 1 else " (to render the first of the list each model has, end it with \"first\")"
        return ManifestError(self.shown_as or self.path, line_of(lines, key),
                             f"{_where(key)} names a sequence that {who} not have: {shown}{hint}")


def _nearest(asked, names: list[str]) -> str:
    """`did you mean 'Stand'? it has ...`: the nearest names (case-insensitive) and what the model has."""
    has = f"it has {', '.join(repr(str(n)) for n in names[:12])}{' ...' if len(names) > 12 else ''}" if names \
        else "it has no sequences"
    lower = {str(n).lower(): str(n) for n in names}
    close = [lower[c] for c in difflib.get_close_matches(str(asked).lower(), list(lower), n=2, cutoff=0.6)]
    return f"did you mean {' or '.join(map(repr, close))}? {has}" if close else has


# --------------------------------------------------------------------------------------------
# Parsing


class _Ctx:
    def __init__(self, path: Path, text: str):
        self.path = path
        self.text = text
        self.lines = key_lines(text)

    def error(self, key: tuple, message: str) -> ManifestError:
        return ManifestError(self.path, line_of(self.lines, key), message)


def _where(key: tuple) -> str:
    """A readable name for a key path: `[[models]] #2: 'size'`, `'thresholds.min_ssim'`."""
    key = tuple(key)
    idx = max((i for i, p in enumerate(key) if isinstance(p, int)), default=None)
    if idx is None:
        return repr(".".join(key))
    head = f"[[{'.'.join(str(p) for p in key[:idx] if not isinstance(p, int))}]] #{key[idx] + 1}"
    rest = ".".join(str(p) for p in key[idx + 1:])
    return f"{head}: {rest!r}" if rest else head


_type_name = type_name


def _setting(ctx: _Ctx, key: tuple, check, value, *args):
    """A value checked by farm.settings' rule, its error placed at the key's line."""
    try:
        return check(value, _where(key), *args)
    except SettingError as e:
        raise ctx.error(key, str(e)) from None


def _check_keys(ctx: _Ctx, table: dict, known: tuple, key: tuple, what: str) -> None:
    for k in table:
        if k not in known:
            close = difflib.get_close_matches(k, known, n=1)
            hint = f"; did you mean {close[0]!r}?" if close else ""
            raise ctx.error((*key, k), f"unknown key {k!r} in {what}{hint} (known keys: {', '.join(known)})")


def _int(ctx: _Ctx, key: tuple, value, lo: int, hi: int | None = None) -> int:
    return _setting(ctx, key, check_int, value, lo, hi)


def _str(ctx: _Ctx, key: tuple, value) -> str:
    if not isinstance(value, str):
        raise ctx.error(key, f"{_where(key)} must be a string, not {_type_name(value)} {value!r}")
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
    if FIRST in out and out[-1] != FIRST:
        raise ctx.error(key, f"{_where(key)}: \"first\" ends a fallback list (the entries after it are never"
                             f" used): write [..., \"first\"]")
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
            out.append(_setting(ctx, key, check_time, v))
        elif isinstance(v, str):
            m = _FRACTION.fullmatch(v)
            if not m or not 0.0 <= float(m.group(1)) <= 100.0:
                raise ctx.error(key, f"{_where(key)}[{i}] must be a fraction from \"0%\" to \"100%\", not {v!r}")
            out.append(percent_text(m.group(1)))  # as the trace key names it
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
    """Each value checked by the comparison's own rule (farm.compare.Thresholds)."""
    reverse = {v: k for k, v in THRESHOLD_ALIASES.items()}
    for name, v in values.items():
        given = name if name in table else reverse.get(name, name)
        try:
            Thresholds.from_dict({name: v})
        except ValueError as e:
            raise ctx.error((*key, given), f"{str(e).replace(repr(name), repr(given))} (in {_where(key)})") from None


def _settings(ctx: _Ctx, table: dict, key: tuple, root: Path) -> dict:
    """Validate the render settings present in `table`; returns {name: value} for those given."""
    s: dict[str, Any] = {}
    for setting in RENDER_SETTINGS:  # farm.settings' table: each by its own rule (paths relative to here)
        if setting.name in table:
            value = _setting(ctx, (*key, setting.name), setting.check, table[setting.name],
                             *((root,) if setting.relative else ()))
            s.update(setting.spread(value))
    if "missing" in table:
        s["missing"] = _setting(ctx, (*key, "missing"), check_missing_policy, table["missing"])
    if "sequences" in table:
        s["sequences"] = _sequences(ctx, (*key, "sequences"), table["sequences"])
    if "timestamps" in table and "every" in table:
        later = max(("timestamps", "every"), key=lambda k: line_of(ctx.lines, (*key, k)) or 0)
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
        out.append(TraceThresholds(match, values, line_of(ctx.lines, k)))
    return out


def _refuse_links(ctx: _Ctx, k: tuple, pattern: str, full: str, matches: list[str]) -> None:
    """A glob's match that is a link whose real path leaves the folder the glob searches (its part
    before the first wildcard) is refused, naming the link and where it points (issue 34 item 4);
    `follow_links = true` in the manifest follows it."""
    fixed = []
    for part in Path(full).parts:
        if glob.has_magic(part):
            break
        fixed.append(part)
    base = Path(os.path.realpath(Path(*fixed) if fixed else "."))
    for p in matches:
        real = Path(os.path.realpath(p))
        if not real.is_relative_to(base):
            raise ctx.error(k, f"{_where(k)}: {pattern!r} matches {p}, a link to {real}, outside {base}; refused"
                               f" (follow_links = true in the manifest follows it)")


def _model_files(ctx: _Ctx, key: tuple, entry: dict, root: Path, listfile: str | None = None,
                 follow_links: bool = False) -> list[Path]:
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
    files: list[str] = []
    for pattern, k in patterns:
        split = split_source(pattern)
        outer = str(split[0]) if split else pattern
        full = outer if os.path.isabs(outer) else str(root / outer)
        if glob.has_magic(outer):
            matches = [p for p in glob.glob(full, recursive=True) if os.path.isfile(p)]
            if not follow_links:
                _refuse_links(ctx, k, pattern, full, matches)
            found = sorted(str(Path(p).resolve()) for p in matches)
        else:
            found = [str(Path(full).resolve())] if os.path.isfile(full) else []
        if split:  # models inside archives: "maps/*.w3x:**/*.mdx" (entries matched case-insensitively)
            try:
                found = [s for a in found for s in list_models(a, split[1], listfile=listfile)]
            except MpqError as e:
                raise ctx.error(k, f"{_where(k)}: {e}") from None
        if not found:
            what = "glob" if glob.has_magic(pattern) else "path"
            raise ctx.error(k, f"{_where(k)}: {what} {pattern!r} matches no file (relative to {root})")
        files.extend(p for p in found if p not in files)
    return files


def _rel(source: str, root: Path) -> str:
    """How a model is named in trace keys: relative to the manifest's folder (POSIX separators);
    an archive entry as ARCHIVE:ENTRY with the archive relative."""
    split = split_source(source)
    path = Path(split[0] if split else source)
    try:
        rel = path.resolve().relative_to(root.resolve()).as_posix()
    except ValueError:
        rel = Path(os.path.relpath(path.resolve(), root.resolve())).as_posix()
    return f"{rel}:{split[1].replace(chr(92), '/')}" if split else rel


def _inside(source: str, root: Path) -> bool:
    split = split_source(source)
    return Path(split[0] if split else source).resolve().is_relative_to(root.resolve())


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
    listfile = None
    if "listfile" in data:  # entry names for archives without a (listfile), for "maps/*.w3x:**/*.mdx"
        listfile = str((root / _str(ctx, ("listfile",), data["listfile"])).resolve())
        if not Path(listfile).is_file():
            raise ctx.error(("listfile",), f"'listfile' {data['listfile']!r} is not a file (looked for {listfile})")
    chosen: dict[Path, ModelPlan] = {}
    for i, entry in enumerate(models):
        key = ("models", i)
        _check_keys(ctx, entry, MODEL_KEYS, key, f"[[models]] #{i + 1}")
        own = _settings(ctx, entry, key, root)
        files = _model_files(ctx, key, entry, root, listfile, bool({**defaults, **own}.get("follow_links")))
        settings = {**defaults, **own}
        for each in (s.name for s in RENDER_SETTINGS if s.accumulates):  # added to the job's, not instead
            settings[each] = tuple(dict.fromkeys((*defaults.get(each, ()), *own.get(each, ()))))
        settings["thresholds"] = {**defaults.get("thresholds", {}), **own.get("thresholds", {})}
        render = RenderSettings(**{k: settings.pop(k) for k in RenderSettings.FIELDS if k in settings})
        for f in files:
            chosen.pop(f, None)  # the last entry matching a file wins (and orders it)
            chosen[f] = ModelPlan(path=f, rel=_rel(f, root), entry=i + 1, line=line_of(ctx.lines, key),
                                  settings=render, root=str(root) if _inside(f, root) else None, **settings)
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
