"""Emitter properties sampled together: one table per emitter kind, one TrackBank behind it.

A table has a row per emitter and a column per property (a vec3 property takes three columns).
`sample(clock)` returns the whole (rows, columns) float64 table at that clock: static values where a
property has no track, the track's value (or the tag's default, §2.9) where it has one. All animated
properties of all emitters of a kind are sampled by the animation module's vectorised TrackBank.
"""

from __future__ import annotations

import numpy as np

from renderer.anim.tracks import TrackBank, value_width
from renderer.model import Track


def finite(x, default: float = 0.0) -> float:
    try:
        v = float(x)
    except (TypeError, ValueError):
        return default
    return v if np.isfinite(v) else default


class ParamTable:
    """Properties of several emitters, by (row, tag); see the module docstring."""

    def __init__(self, tags: tuple[str, ...], global_sequences=()):
        self.tags = tags
        self.columns: dict[str, int] = {}
        at = 0
        for tag in tags:
            self.columns[tag] = at
            at += value_width(tag)
        self.width = at
        self._rows: list[np.ndarray] = []
        self._bank = TrackBank(global_sequences)
        self._dest: dict[str, tuple[list, list, list]] = {}
        self.tracks: list[tuple[int, str, Track]] = []

    def add_row(self, statics: dict[str, object], tracks: dict[str, Track]) -> int:
        """A row from static values (by tag) and the record's tracks; returns the row index."""
        row = len(self._rows)
        base = np.zeros(self.width)
        for tag, col in self.columns.items():
            k = value_width(tag)
            v = np.asarray(statics.get(tag, 0.0), np.float64).reshape(-1)
            base[col:col + k] = [finite(x) for x in (v if len(v) == k else np.resize(v, k))]
        self._rows.append(base)
        for tag in self.tags:
            track = tracks.get(tag)
            if track is None:
                continue
            col, k = self.columns[tag], value_width(tag)
            group, r = self._bank.add(track, base[col:col + k])
            d = self._dest.setdefault(group, ([], [], []))
            d[0].append(row)
            d[1].append(col)
            d[2].append(r)
            self.tracks.append((row, tag, track))
        return row

    def freeze(self) -> ParamTable:
        self._bank.freeze()
        self.base = np.array(self._rows, np.float64).reshape(len(self._rows), self.width)
        self._plans = []
        for group, (rows, cols, bank_rows) in self._dest.items():
            k = self._bank.sets[group].width
            rows_a = np.repeat(np.array(rows, np.int64), k)
            cols_a = (np.array(cols, np.int64)[:, None] + np.arange(k)).reshape(-1)
            self._plans.append((group, rows_a, cols_a, np.array(bank_rows, np.int64)))
        return self

    def sample(self, clock) -> np.ndarray:
        out = self.base.copy()
        if not self._plans:
            return out
        sampled = self._bank.sample(clock)
        for group, rows, cols, bank_rows in self._plans:
            out[rows, cols] = sampled[group][bank_rows].reshape(-1)
        out[~np.isfinite(out)] = 0.0
        return out

    def col(self, tag: str) -> int:
        return self.columns[tag]
