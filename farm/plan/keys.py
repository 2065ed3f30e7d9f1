"""Trace keys: the one place that builds and parses them.

A trace key names everything a manifest decides about a frame, as one stable string:

    models/crate.mdx|Stand|500ms|auto|64x64|msaa0|team0|transparent

(model path relative to the manifest, sequence name, ms from the sequence start, camera, size,
MSAA, team colour, background; ``|white`` is appended when missing textures are drawn plain white
instead of the default checker, ``|lighting=NAME`` when the lighting rule is not the default
one, renderer.rules.DEFAULT_LIGHTING, and ``|lights=model`` / ``|events=model`` when the model's
own lights or event visuals are drawn). '|' and '%' inside names are percent-escaped. A model with no
sequences has the sequence ``-`` (bind pose). The model's content hash, renderer version and GL
environment complete the trace in each image's metadata; they are not in the key, so a golden can
follow a trace across model edits and Mesa upgrades.

`trace_key` builds a key, `parse_key` takes one apart into a `TraceKey` (`str(parse_key(k)) == k`
for every key `trace_key` makes). Code that needs the model or the sequence of a key calls
`parse_key`; nothing else splits on '|'.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from renderer.rules import DEFAULT_LIGHTING

__all__ = ["TraceKeyError", "TraceKey", "parse_key", "trace_key"]

NO_SEQUENCE = "-"


def _esc(text: str) -> str:
    return str(text).replace("%", "%25").replace("|", "%7C")


def _unesc(text: str) -> str:
    return text.replace("%7C", "|").replace("%25", "%")


class TraceKeyError(ValueError):
    """A string that is not a trace key."""


@dataclass(frozen=True)
class TraceKey:
    model: str
    sequence: str | None  # None: bind pose
    time_ms: int
    camera: str
    width: int
    height: int
    msaa: int
    team: int
    background: str
    missing_textures: str = "checker"
    lighting: str = DEFAULT_LIGHTING
    lights: str = "off"
    events: str = "off"

    def __str__(self) -> str:
        return trace_key(self.model, self.sequence, self.time_ms, self.camera, self.width, self.height, self.msaa,
                         self.team, self.background, self.missing_textures, self.lighting, self.lights, self.events)

    @property
    def rest(self) -> str:
        """The key without its model part (what names a test case within a model)."""
        return str(self).split("|", 1)[1]


def trace_key(model: str, sequence: str | None, time_ms: int, camera: str, width: int, height: int, msaa: int,
              team: int, background: str, missing_textures: str = "checker", lighting: str = DEFAULT_LIGHTING,
              lights: str = "off", events: str = "off") -> str:
    parts = [_esc(model), NO_SEQUENCE if sequence is None else _esc(sequence), f"{int(time_ms)}ms", _esc(camera),
             f"{int(width)}x{int(height)}", f"msaa{int(msaa)}", f"team{int(team)}", background]
    if missing_textures != "checker":
        parts.append(missing_textures)
    if lighting != DEFAULT_LIGHTING:
        parts.append(f"lighting={lighting}")
    if lights != "off":
        parts.append(f"lights={lights}")
    if events != "off":
        parts.append(f"events={events}")
    return "|".join(parts)


_TIME = re.compile(r"(-?\d+)ms")
_SIZE = re.compile(r"(\d+)x(\d+)")


def parse_key(key: str) -> TraceKey:
    parts = str(key).split("|")
    if not 8 <= len(parts) <= 12:
        raise TraceKeyError(f"{key!r} is not a trace key (model|sequence|time|camera|size|msaa|team|background)")
    extras = {"missing": "checker", "lighting": DEFAULT_LIGHTING, "lights": "off", "events": "off"}
    for extra in parts[8:]:
        name, eq, value = extra.partition("=")
        extras[name if eq else "missing"] = value if eq else extra
    missing, lighting, lights, events = extras["missing"], extras["lighting"], extras["lights"], extras["events"]
    model, seq, time, camera, size, msaa, team, background = parts[:8]
    t, s = _TIME.fullmatch(time), _SIZE.fullmatch(size)
    if not (t and s and msaa.startswith("msaa") and msaa[4:].isdigit() and team.startswith("team")
            and team[4:].isdigit()):
        raise TraceKeyError(f"{key!r} is not a trace key (model|sequence|time|camera|size|msaa|team|background)")
    return TraceKey(_unesc(model), None if seq == NO_SEQUENCE else _unesc(seq), int(t.group(1)), _unesc(camera),
                    int(s.group(1)), int(s.group(2)), int(msaa[4:]), int(team[4:]), background, missing, lighting,
                    lights, events)
