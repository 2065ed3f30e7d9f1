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
`farm.settings.RenderSettings`, or anything with its key fields, `KEY_FIELDS`: a `TraceKey` is one);
`trace_key` is the same key from the fields given one by one. `parse_key` takes one apart into a
`TraceKey` (`str(parse_key(k)) == k` for every key `trace_key_for` makes). Code that needs the model
or the sequence of a key calls `parse_key`; nothing else splits on '|'. `timeless_key` names a key's
frames across times (its time as ``*``), what the report groups into filmstrips.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from types import SimpleNamespace

from renderer.rules import DEFAULT_LIGHTING
from renderer.texture_set import DEFAULT_MISSING_TEXTURES

__all__ = ["KEY_FIELDS", "TraceKeyError", "TraceKey", "legacy_key", "parse_key", "percent_text", "timeless_key",
           "trace_key", "trace_key_for"]

NO_SEQUENCE = "-"
# The settings a key names, after the model, sequence and time: the attributes `trace_key_for` reads.
KEY_FIELDS = ("camera", "width", "height", "msaa", "team", "background", "missing_textures", "lighting", "lights",
              "events")


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


@dataclass(frozen=True)
class TraceKey:
    model: str
    sequence: str | None  # None: bind pose
    time_ms: int | None  # None for a fraction of the sequence (`time_pct`): its ms is in the trace record
    camera: str
    width: int
    height: int
    msaa: int
    team: int
    background: str
    missing_textures: str = DEFAULT_MISSING_TEXTURES
    lighting: str = DEFAULT_LIGHTING
    lights: str = "off"
    events: str = "off"
    time_pct: str | None = None  # "50%": a fraction of the sequence's length (percent_text), not ms

    def __str__(self) -> str:
        return trace_key_for(self.model, self.sequence, self.time_ms if self.time_pct is None else self.time_pct,
                             self)

    @property
    def rest(self) -> str:
        """The key without its model part (what names a test case within a model)."""
        return str(self).split("|", 1)[1]


def _time_part(time: int | str) -> str:
    """``500ms`` for ms, ``50%`` for a fraction of the sequence ("50%", as the manifest gives it)."""
    if isinstance(time, str) and time.strip().endswith("%"):
        return percent_text(time)
    return f"{int(time)}ms"


def trace_key_for(model: str, sequence: str | None, time: int | str, settings) -> str:
    """The key of a frame of `model` (its path relative to the manifest) at `time` (ms, or a fraction
    of the sequence as a string, "50%") of `sequence` (None: bind pose), drawn under `settings` (a
    RenderSettings, a TraceKey, anything with the `KEY_FIELDS` attributes)."""
    return _join(model, sequence, _time_part(time), settings)


def _join(model: str, sequence: str | None, time_part: str, s) -> str:
    parts = [_esc(model), NO_SEQUENCE if sequence is None else _esc(sequence), time_part, _esc(s.camera),
             f"{int(s.width)}x{int(s.height)}", f"msaa{int(s.msaa)}", f"team{int(s.team)}", s.background]
    if s.missing_textures != DEFAULT_MISSING_TEXTURES:
        parts.append(s.missing_textures)
    if s.lighting != DEFAULT_LIGHTING:
        parts.append(f"lighting={s.lighting}")
    if s.lights != "off":
        parts.append(f"lights={s.lights}")
    if s.events != "off":
        parts.append(f"events={s.events}")
    return "|".join(parts)


def trace_key(model: str, sequence: str | None, time_ms: int | str, camera: str, width: int, height: int, msaa: int,
              team: int, background: str, missing_textures: str = DEFAULT_MISSING_TEXTURES,
              lighting: str = DEFAULT_LIGHTING, lights: str = "off", events: str = "off") -> str:
    """`trace_key_for` with the settings given one by one (tests, tools that have no settings object)."""
    fields = SimpleNamespace(camera=camera, width=width, height=height, msaa=msaa, team=team, background=background,
                             missing_textures=missing_textures, lighting=lighting, lights=lights, events=events)
    return trace_key_for(model, sequence, time_ms, fields)


_TIME = re.compile(r"(-?\d+)ms")
_PCT = re.compile(r"\d+(?:\.\d+)?(?:e-\d+)?%")
_SIZE = re.compile(r"(\d+)x(\d+)")


def parse_key(key: str) -> TraceKey:
    parts = str(key).split("|")
    if not 8 <= len(parts) <= 12:
        raise TraceKeyError(f"{key!r} is not a trace key (model|sequence|time|camera|size|msaa|team|background)")
    extras = {"missing": DEFAULT_MISSING_TEXTURES, "lighting": DEFAULT_LIGHTING, "lights": "off", "events": "off"}
    for extra in parts[8:]:
        name, eq, value = extra.partition("=")
        extras[name if eq else "missing"] = value if eq else extra
    missing, lighting, lights, events = extras["missing"], extras["lighting"], extras["lights"], extras["events"]
    model, seq, time, camera, size, msaa, team, background = parts[:8]
    t, s = _TIME.fullmatch(time), _SIZE.fullmatch(size)
    pct = time if t is None and _PCT.fullmatch(time) and percent_text(time) == time else None
    if not ((t or pct) and s and msaa.startswith("msaa") and msaa[4:].isdigit() and team.startswith("team")
            and team[4:].isdigit()):
        raise TraceKeyError(f"{key!r} is not a trace key (model|sequence|time|camera|size|msaa|team|background)")
    return TraceKey(_unesc(model), None if seq == NO_SEQUENCE else _unesc(seq), int(t.group(1)) if t else None,
                    _unesc(camera), int(s.group(1)), int(s.group(2)), int(msaa[4:]), int(team[4:]), background,
                    missing, lighting, lights, events, pct)


def timeless_key(key: str) -> str:
    """`key` with ``*`` for its time (``models/crate.mdx|Stand|*|auto|...``): the one name of every
    frame of a model, sequence, camera and size (every key field but the time) across timestamps, ms
    and fractions alike (the report's filmstrips, farm.report.strips). TraceKeyError for a non-key."""
    k = parse_key(key)
    return _join(k.model, k.sequence, "*", k)


def legacy_key(key: str, time_ms: int | None) -> str | None:
    """The key the planner made, before keys named fractions, for the trace `key` (a fraction of its
    sequence) rendered at `time_ms`: the same key with the resolved ms as its time (``...|Stand|1000ms|...`` for
    ``...|Stand|50%|...`` at 1000 ms), what goldens approved then are filed under. None for a key in
    ms (its own key), one that does not parse, or an unknown `time_ms`."""
    try:
        k = parse_key(key)
    except TraceKeyError:
        return None
    if k.time_pct is None or isinstance(time_ms, bool) or not isinstance(time_ms, int):
        return None
    return str(replace(k, time_ms=time_ms, time_pct=None))
