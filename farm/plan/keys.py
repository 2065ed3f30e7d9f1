"""Trace keys: the one place that builds and parses them.

A trace key names everything a manifest decides about a frame, as one stable string:

    models/crate.mdx|Stand|500ms|auto|64x64|msaa0|team0|transparent

(model path relative to the manifest, sequence name, time, camera, size,
MSAA, team colour, background; ``|white`` is appended when missing textures are drawn plain white
instead of the default checker, ``|lighting=NAME`` when the lighting rule is not the default
one, renderer.rules.DEFAULT_LIGHTING, and ``|lights=model`` / ``|events=model`` when the model's
own lights or event visuals are drawn). '|' and '%' inside names are percent-escaped. A model with no
sequences has the sequence ``-`` (bind pose).

The time is ms from the sequence start (``500ms``), or, for a manifest timestamp given as a fraction
of the sequence, that fraction as the manifest wrote it (``50%``, `percent_text`): the trace keeps its
key when the sequence's length changes (the frame changes, the trace does not), and the resolved ms is
in the trace record (the job's ``time_ms``, the image's trace), never in the key; `TraceKey.time_ms`
is None for such a key. `legacy_key` gives the ms key the planner made for it before keys named
fractions, so goldens approved under that key still answer (farm.goldens.index.GoldenIndex.lookup).

The model's content hash, renderer version and GL environment complete the trace in each image's
metadata; they are not in the key, so a golden can follow a trace across model edits and Mesa
upgrades.

`trace_key_for(model, sequence, time, settings)` builds a key from a settings object (a
`farm.settings.RenderSettings`, or anything with the attributes of `KEY_SETTINGS`: a `TraceKey` is
one). Which settings a key names, how it spells each and in which place come from the table of
render settings (farm.settings.RENDER_SETTINGS, each row's `key`); nothing here names a setting.
`parse_key` takes one apart into a
`TraceKey` (`str(parse_key(k)) == k` for every key `trace_key_for` makes). Code that needs the model
or the sequence of a key calls `parse_key`; nothing else splits on '|'. `timeless_key` names a key's
frames across times (its time as ``*``), what the report groups into filmstrips.
"""

from __future__ import annotations

import functools
import re
from dataclasses import field, make_dataclass, replace

from farm.settings import RENDER_SETTINGS, SIZE

__all__ = ["KEY_SETTINGS", "TraceKeyError", "TraceKey", "key_time_pct", "legacy_key", "model_and_rest", "parse_key",
           "percent_text", "timeless_key", "trace_key_for"]

NO_SEQUENCE = "-"
# The settings a key names after the model, sequence and time (farm.settings.RENDER_SETTINGS' `key`):
# the fixed parts by position, then the optional ones in the table's order.
_FIXED = tuple(sorted((s for s in RENDER_SETTINGS if s.key and s.key.position is not None),
                      key=lambda s: s.key.position))
_OPTIONAL = tuple(s for s in RENDER_SETTINGS if s.key and s.key.position is None)
KEY_SETTINGS = (*_FIXED, *_OPTIONAL)
_NAMED = {s.key.prefix: s for s in _OPTIONAL if s.key.prefix}  # "lighting=" -> its row
_BARE = next((s for s in _OPTIONAL if not s.key.prefix), None)  # the optional part spelled as its value alone
_SHAPE = "model|sequence|time|" + "|".join(s.name for s in _FIXED)


def _esc(text: str) -> str:
    return str(text).replace("%", "%25").replace("|", "%7C")


def _unesc(text: str) -> str:
    return text.replace("%7C", "|").replace("%25", "%")


class TraceKeyError(ValueError):
    """A string that is not a trace key."""


def percent_text(value: float | str) -> str:
    """A fraction of a sequence as keys (and manifests) spell it: ``50%``, ``12.5%`` (from 50, "50.0%", ...)."""
    text = str(value).strip()
    return f"{float(text[:-1] if text.endswith('%') else text):g}%"


def _str(self) -> str:
    return trace_key_for(self.model, self.sequence, self.time_ms if self.time_pct is None else self.time_pct, self)


def _rest(self) -> str:
    """The key without its model part (what names a test case within a model)."""
    return str(self).split("|", 1)[1]


# model, sequence (None: bind pose), time_ms (None for a fraction of the sequence, `time_pct`: its ms
# is in the trace record), then the key's settings in key order, then time_pct ("50%", percent_text).
TraceKey = make_dataclass(
    "TraceKey", [("model", str), ("sequence", "str | None"), ("time_ms", "int | None"),
                 *[(a, "Any", field(default=v) if s.key.position is None else field())
                   for s in KEY_SETTINGS for a, v in s.spread(s.default).items()],
                 ("time_pct", "str | None", field(default=None, kw_only=True))],
    frozen=True, namespace={"__str__": _str, "rest": property(_rest),
                            "__doc__": "A trace key taken apart (parse_key); str() puts it back together."})
TraceKey.__module__ = __name__


def _time_part(time: int | str) -> str:
    """``500ms`` for ms, ``50%`` for a fraction of the sequence ("50%", as the manifest gives it)."""
    if isinstance(time, str) and time.strip().endswith("%"):
        return percent_text(time)
    return f"{int(time)}ms"


def trace_key_for(model: str, sequence: str | None, time: int | str, settings) -> str:
    """The key of a frame of `model` (its path relative to the manifest) at `time` (ms, or a fraction
    of the sequence as a string, "50%") of `sequence` (None: bind pose), drawn under `settings` (a
    RenderSettings, a TraceKey, anything with the attributes of `KEY_SETTINGS`)."""
    return _join(model, sequence, _time_part(time), settings)


def _spell(s, value) -> str:
    if s.type is SIZE:
        return f"{int(value[0])}x{int(value[1])}"
    return s.key.prefix + (str(int(value)) if s.type is int else _esc(value))


def _join(model: str, sequence: str | None, time_part: str, settings) -> str:
    parts = [_esc(model), NO_SEQUENCE if sequence is None else _esc(sequence), time_part]
    parts += [_spell(s, s.value(settings)) for s in _FIXED]
    parts += [_spell(s, v) for s in _OPTIONAL if (v := s.value(settings)) != s.default]
    return "|".join(parts)


_TIME = re.compile(r"(-?\d+)ms")
_PCT = re.compile(r"\d+(?:\.\d+)?(?:e-\d+)?%")
_SIZE = re.compile(r"(\d+)x(\d+)")


def _read(s, text: str):
    """The value `text` spells for setting `s`, or None when it does not spell one."""
    if s.type is SIZE:
        m = _SIZE.fullmatch(text)
        return (int(m.group(1)), int(m.group(2))) if m else None
    if not text.startswith(s.key.prefix):
        return None
    text = text[len(s.key.prefix):]
    if s.type is int:
        return int(text) if text.isdigit() else None
    return _unesc(text)


def _optional(key: str, part: str):
    name, eq, _ = part.partition("=")
    s = _NAMED.get(name + eq) if eq else _BARE
    value = None if s is None else _read(s, part)
    if value is None:
        raise TraceKeyError(f"{key!r} is not a trace key: {part!r} is no setting a key names")
    return s, value


def parse_key(key: str) -> TraceKey:
    parts = str(key).split("|")
    if not 3 + len(_FIXED) <= len(parts) <= 3 + len(KEY_SETTINGS):
        raise TraceKeyError(f"{key!r} is not a trace key ({_SHAPE})")
    model, seq, time = parts[:3]
    t = _TIME.fullmatch(time)
    pct = time if t is None and _PCT.fullmatch(time) and percent_text(time) == time else None
    values = {s: _read(s, p) for s, p in zip(_FIXED, parts[3:], strict=False)}
    if not (t or pct) or any(v is None for v in values.values()):
        raise TraceKeyError(f"{key!r} is not a trace key ({_SHAPE})")
    values.update(_optional(key, p) for p in parts[3 + len(_FIXED):])
    fields = {a: v for s, value in values.items() for a, v in s.spread(value).items()}
    return TraceKey(_unesc(model), None if seq == NO_SEQUENCE else _unesc(seq), int(t.group(1)) if t else None,
                    time_pct=pct, **fields)


def timeless_key(key: str) -> str:
    """`key` with ``*`` for its time (``models/crate.mdx|Stand|*|auto|...``): the one name of every
    frame of a model, sequence, camera and size (every key field but the time) across timestamps, ms
    and fractions alike (the report's filmstrips, farm.report.strips). TraceKeyError for a non-key."""
    parts = _timeless_parts(key)
    if parts is not None:
        return parts[1] + "*" + parts[2]
    k = parse_key(key)  # the error names the key itself
    return _join(k.model, k.sequence, "*", k)


def model_and_rest(key: str) -> tuple[str, str]:
    """`parse_key(key)`'s model and `rest` (the key without its model part: a test case's name), parsing a
    model, sequence and settings once for all its times. TraceKeyError for a non-key."""
    parts = _timeless_parts(key)
    if parts is None:
        k = parse_key(key)
        return k.model, k.rest
    time = key.split("|", 3)[2]
    t = _TIME.fullmatch(time)
    head = parts[1].split("|", 1)[1]
    return parts[0], f"{head}{_time_part(int(t.group(1))) if t else time}{parts[2]}"


def _timeless_parts(key: str) -> tuple[str, str, str] | None:
    """(model, the canonical key up to its time, from after it) of a key whose time parse_key takes; None
    when it does not parse (the caller parses it again, for the error naming the key itself)."""
    parts = str(key).split("|", 3)
    if len(parts) == 4 and (_TIME.fullmatch(parts[2]) or key_time_pct(key)):  # the time as parse_key takes it
        try:
            return _untimed(parts[0], parts[1], parts[3])  # one parse for every time of a model, sequence, ...
        except TraceKeyError:
            return None
    return None


@functools.lru_cache(maxsize=4096)
def _untimed(model: str, sequence: str, rest: str) -> tuple[str, str, str]:
    k = parse_key(f"{model}|{sequence}|0ms|{rest}")
    parts = _join(k.model, k.sequence, "*", k).split("|")  # no part holds a "|" of its own (_esc)
    return k.model, f"{parts[0]}|{parts[1]}|", "|" + "|".join(parts[3:])


def legacy_key(key: str, time_ms: int | None) -> str | None:
    """The key the planner made, before keys named fractions, for the trace `key` (a fraction of its
    sequence) rendered at `time_ms`: the same key with the resolved ms as its time (``...|Stand|1000ms|...`` for
    ``...|Stand|50%|...`` at 1000 ms), what goldens approved then are filed under. None for a key in
    ms (its own key), one that does not parse, or an unknown `time_ms`."""
    # A key whose time is in ms has no "%|" (names escape their "%" as %25): nothing to parse. A
    # comparison asks this of every trace, and parsing each was about a tenth of its time.
    if "%|" not in str(key):
        return None
    try:
        k = parse_key(key)
    except TraceKeyError:
        return None
    if k.time_pct is None or isinstance(time_ms, bool) or not isinstance(time_ms, int):
        return None
    return str(replace(k, time_ms=time_ms, time_pct=None))


def key_time_pct(key: str) -> str | None:
    """The fraction of its sequence a key (one `parse_key` reads) names as its time, ``50%``; None for a
    key in ms. Its time part only, as parse_key reads it: a report labels every frame of a filmstrip."""
    parts = str(key).split("|", 3)
    time = parts[2] if len(parts) > 3 else ""
    return time if _PCT.fullmatch(time) and percent_text(time) == time else None
