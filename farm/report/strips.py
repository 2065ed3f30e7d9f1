"""Filmstrips: the traces of one model, sequence, camera and size (every field of the key but its
time: farm.plan.keys.timeless_key) across timestamps, grouped for the HTML report and the Markdown
summary. A strip has two or more frames; a trace alone at its time stays a trace of its own.

A strip's frames are in time order (the resolved ms of each trace record, `time_ms`, also for keys
that name a fraction of the sequence). Its worst frame is the first of its frames in the report's
own order (farm.report.model.sort_traces: failures first, then new, then passed; the lowest SSIM
first); a strip fails when that frame's status is in the failed group (farm.compare.status), and
then the report selects that frame first. Strips sort like traces, by their worst frame. Nothing
here judges a frame: the statuses are the comparison's.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from farm.compare.status import LABELS, REPORT_ORDER, group_of
from farm.compare.table import LazyTraces
from farm.plan.keys import TraceKeyError, key_time_pct, parse_key, timeless_key
from farm.report.model import trace_rank

__all__ = ["FilmStrip", "filmstrips", "strip_anchor", "time_text"]


def strip_anchor(name: str) -> str:
    """The report's anchor of the strip named `name` (its timeless key): ``s-`` and 12 hex digits."""
    return "s-" + hashlib.sha256(name.encode("utf-8")).hexdigest()[:12]


def _time_ms(t: dict) -> int | None:
    ms = t.get("time_ms")
    if isinstance(ms, int) and not isinstance(ms, bool):
        return ms
    return parse_key(t["key"]).time_ms


def time_text(t: dict) -> str:
    """A frame's time as its strip labels it: ``500 ms``; ``50% (1000 ms)`` for a key naming a fraction."""
    pct, ms = key_time_pct(t["key"]), _time_ms(t)
    if pct is not None:
        return pct if ms is None else f"{pct} ({ms} ms)"
    return f"{ms} ms"


@dataclass(frozen=True)
class FilmStrip:
    name: str  # the frames' timeless key (farm.plan.keys.timeless_key)
    frames: Sequence[dict]  # trace results, in time order (read as they are reached: LazyTraces)
    worst: int  # the index in `frames` of the worst frame

    @property
    def status(self) -> str:
        """The strip's status: its worst frame's."""
        return self.frames[self.worst]["status"]

    @property
    def failing(self) -> bool:
        return group_of(self.status) == "failed"

    @property
    def selected(self) -> int:
        """The frame shown first: the worst when the strip fails, else the first in time."""
        return self.worst if self.failing else 0

    @property
    def failed(self) -> list[int]:
        """The indices of the frames in the failed group, in time order."""
        return [i for i, t in enumerate(self.frames) if group_of(t["status"]) == "failed"]

    @property
    def anchor(self) -> str:
        return strip_anchor(self.name)

    @property
    def model(self) -> str:
        return self.frames[0].get("model") or parse_key(self.frames[0]["key"]).model

    def counts_text(self) -> str:
        """``5 frames: 1 failed, 4 passed`` (statuses in the report's order)."""
        seen = [t["status"] for t in self.frames]
        parts = [f"{seen.count(s)} {LABELS.get(s, s)}" for s in REPORT_ORDER if s in seen]
        parts += [f"{seen.count(s)} {s}" for s in dict.fromkeys(seen) if s not in REPORT_ORDER]
        return f"{len(self.frames)} frames: " + ", ".join(parts)

    def summary(self) -> str:
        """The counts and, when the strip fails, where in time: ``...; failing at 500 ms; worst: 500 ms``
        (``changed at`` when every such frame is a diff's changed one)."""
        text = self.counts_text()
        if self.failing:
            word = "changed" if all(self.frames[i]["status"] == "changed" for i in self.failed) else "failing"
            text += f"; {word} at " + ", ".join(time_text(self.frames[i]) for i in self.failed)
            text += "; worst: " + time_text(self.frames[self.worst])
        return text


def _when(t: Mapping) -> tuple:
    ms = _time_ms(t)
    return ms is None, ms or 0, t["key"]


def filmstrips(traces) -> list[FilmStrip]:
    """The strips of `traces` (trace results: a mapping key -> result, such as a comparison's, or an
    iterable of results): those whose keys differ only in their time, two or more each, in time order;
    the strips in the report's order of their worst frames. A strip holds its frames' keys and reads each
    frame from the mapping when it is reached (farm.compare.table.LazyTraces), so the strips of a large
    run do not hold its results as dicts."""
    table = traces if isinstance(traces, Mapping) else {t["key"]: t for t in traces}
    groups: dict[str, list[tuple]] = {}
    for key, t in table.items():
        try:
            name = timeless_key(t["key"])
        except TraceKeyError:  # not a trace key: it stays a trace of its own
            continue
        groups.setdefault(name, []).append((_when(t), trace_rank(t), key))
    strips = []
    for name, frames in groups.items():
        if len(frames) < 2:
            continue
        frames.sort(key=lambda f: f[0])
        worst = min(range(len(frames)), key=lambda i: frames[i][1])  # the first in sort_traces order
        strips.append((frames[worst][1], FilmStrip(name, LazyTraces(table, [f[2] for f in frames]), worst)))
    strips.sort(key=lambda s: s[0])
    return [s for _, s in strips]
