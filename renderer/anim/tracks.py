"""Keyframe track sampling, as the format reference (§2.9, §2.10) describes it.

Time
----
A frame is asked for at `t_ms`, milliseconds from the start of a sequence (the trace's timestamp).
`make_clock` turns that into the times the tracks are evaluated at. This rule is part of the trace:

* sequence time: frame = start + t_ms while t_ms <= end - start. Past the end a looping sequence
  (flags bit 0 clear) wraps, frame = start + (t_ms mod (end - start)); a non-looping one holds at
  `end`. (Like the viewer, a looping sequence never shows exactly `end` once it wrapped.)
* global sequences run on their own clock from the same timestamp: for a global sequence of
  duration D > 0 the time is t_ms mod D, independent of which sequence is playing. A track on a
  global sequence of duration 0 (or with its first key beyond D) is constant: its first key.
  A track naming a global sequence the model does not have follows the sequence clock.
* `sequence=None` (no sequence, e.g. a model without any): every property shows its static value
  (the tag default where the record has none), as the viewer shows an instance with no sequence.

Evaluation (per sequence [s, e], or [0, D] for global tracks)
----------------------------------------------------------
* Keys with s <= frame <= e are kept (stable-sorted by frame); no key -> the default value; one key,
  or all kept values equal -> that value (constant).
* time < s, or constant -> the first kept key.
* Otherwise the bracketing pair (k0, k1). When the time is before the first kept key or at/after the
  last one, the pair is (last -> first) with delta = (first - last) + (e - s); for times before the
  first key the start frame is replaced by the first key's frame (the game's wrap quirk: t goes
  negative there). t = (time - start) / delta, or 0 when delta is 0. Not clamped.
* none: p0. linear: p0 + t (p1 - p0). Hermite / Bezier use the stored tangents (out-tangent of k0,
  in-tangent of k1) with no delta-time scaling. Quaternions: linear = shortest-arc slerp; Hermite and
  Bezier = slerp(slerp(p0, p1, t), slerp(a, b, t), 2t(1 - t)).
* Visibility tracks (KLAV KATV KPEV KP2V KRVS) and integer tracks (KMTF KRTX) always step.
  An interpolation type outside 0..3 also steps.

Defaults (§2.9): the table's values where it names one (plus 1 for the CORN visibility KPPV); where
it names none (KMTF, KMTE, the light, emitter and camera tracks, ...) the record's static value,
falling back to zeros.

Speed
-----
Tracks of one value kind are compiled together into a `TrackSet`. For each (track set, sequence)
the keys inside the interval are selected once and concatenated; sampling is then a handful of
numpy operations over all animated tracks at once (one `searchsorted` over the composite key
array), with no Python loop over tracks or keys.
"""

from __future__ import annotations

import math
import weakref
from dataclasses import dataclass

import numpy as np

from renderer.anim import quat
from renderer.model import TRACK_TYPES, Sequence, Track

# The time rule above, named so a trace can record which rule produced its frames. Change the
# name whenever the rule changes.
TIME_RULE = "anim-time-v1: frame=start+t (looping wraps, non-looping holds); global=t mod D (D=0: first key)"

VISIBILITY_TAGS = frozenset({"KLAV", "KATV", "KPEV", "KP2V", "KRVS"})
INTEGER_TAGS = frozenset({"KMTF", "KRTX"})
STEP_TAGS = VISIBILITY_TAGS | INTEGER_TAGS
QUATERNION_TAGS = frozenset({"KGRT", "KTAR"})

# §2.9 defaults: used when a track has no key in the sequence being played. Tags not listed here
# fall back to the record's static value (see `default_value`).
TAG_DEFAULTS: dict[str, tuple[float, ...]] = {
    "KGTR": (0.0, 0.0, 0.0), "KGRT": (0.0, 0.0, 0.0, 1.0), "KGSC": (1.0, 1.0, 1.0),
    "KTAT": (0.0, 0.0, 0.0), "KTAR": (0.0, 0.0, 0.0, 1.0), "KTAS": (1.0, 1.0, 1.0),
    "KMTA": (1.0,), "KGAO": (1.0,), "KGAC": (0.0, 0.0, 0.0),
    "KLAV": (1.0,), "KATV": (1.0,), "KPEV": (1.0,), "KP2V": (1.0,), "KRVS": (1.0,), "KPPV": (1.0,),
    "KRAL": (0.0,),
}
# KMTF's default is the layer's static texture id (§2.9): no entry above, so the static value is used.

INTERP_NONE, INTERP_LINEAR, INTERP_HERMITE, INTERP_BEZIER = 0, 1, 2, 3

# Basis weights: [1, t, t^2, t^3] @ _BASIS[type] = (w0, wa, wb, w1) for p0, out-tangent of k0,
# in-tangent of k1 and p1. Hermite: p0(2t³-3t²+1) + a(t³-2t²+t) + b(t³-t²) + p1(-2t³+3t²);
# Bezier: p0(1-t)³ + 3a t(1-t)² + 3b t²(1-t) + p1 t³.
_BASIS = np.array([
    [[1, 0, 0, 0], [0, 0, 0, 0], [0, 0, 0, 0], [0, 0, 0, 0]],  # none
    [[1, 0, 0, 0], [-1, 0, 0, 1], [0, 0, 0, 0], [0, 0, 0, 0]],  # linear
    [[1, 0, 0, 0], [0, 1, 0, 0], [-3, -2, -1, 3], [2, 1, 1, -2]],  # hermite
    [[1, 0, 0, 0], [-3, 3, 0, 0], [3, -6, 3, 0], [-1, 3, -3, 1]],  # bezier
], np.float64)


def value_width(tag: str) -> int:
    return TRACK_TYPES[tag][1]


def default_value(tag: str, static=None) -> np.ndarray:
    """The value a track gives when it has no key in the playing sequence, as a float64 (k,) array."""
    k = value_width(tag)
    if tag in TAG_DEFAULTS:
        return np.array(TAG_DEFAULTS[tag], np.float64)
    if static is None:
        return np.zeros(k, np.float64)
    return np.asarray(static, np.float64).reshape(k)


def effective_interpolation(track: Track) -> int:
    if track.tag in STEP_TAGS:
        return INTERP_NONE
    i = int(track.interpolation)
    return i if 0 <= i <= 3 else INTERP_NONE


# ---------------------------------------------------------------------------------------------- time


@dataclass(frozen=True)
class Clock:
    """The times one frame evaluates its tracks at (see the module docstring for the rule)."""

    interval: tuple[int, int] | None  # the playing sequence's [start, end]; None = no sequence
    frame: float  # absolute sequence frame (ms), inside the interval
    global_times: tuple[float, ...]  # one time per global sequence, on that sequence's own clock
    t_ms: float = 0.0  # the timestamp this clock was made from


def sequence_frame(sequence: Sequence, t_ms: float) -> float:
    start, end = (int(x) for x in sequence.interval)
    duration = end - start
    if t_ms <= duration:
        return float(start + t_ms)
    if sequence.flags & 1 or duration <= 0:
        return float(end)
    return float(start + math.fmod(t_ms, duration))


def global_time(duration: int, t_ms: float) -> float:
    return float(math.fmod(t_ms, duration)) if duration > 0 else 0.0


# The largest timestamp accepted anywhere (FrameSpec, clocks, effects): 2^53 ms (~285,000 years), the
# last integer a float64 holds exactly, so step indices and `t mod D` stay exact below it.
MAX_TIME_MS = 2**53


def check_time(t_ms) -> float:
    """t_ms as a float, or ValueError unless it is a finite number of ms in 0 .. MAX_TIME_MS."""
    try:
        t = float(t_ms)
    except (TypeError, ValueError, OverflowError):
        raise ValueError(f"timestamp must be a number of ms, not {t_ms!r}") from None
    exact = int(t_ms) if isinstance(t_ms, (int, np.integer)) else t  # 2^53 + 1 is not 2^53
    if not math.isfinite(t) or t < 0 or exact > MAX_TIME_MS:
        raise ValueError(f"timestamp must be a finite number of ms in 0 .. 2^53 ({MAX_TIME_MS}), not {t_ms!r}")
    return t


def make_clock(sequence: Sequence | None, t_ms: float, global_sequences=()) -> Clock:
    t_ms = check_time(t_ms)
    g = tuple(global_time(int(d), t_ms) for d in global_sequences)
    if sequence is None:
        return Clock(None, 0.0, g, t_ms)
    interval = (int(sequence.interval[0]), int(sequence.interval[1]))
    return Clock(interval, sequence_frame(sequence, t_ms), g, t_ms)


# ------------------------------------------------------------------------------------- compilation


def _values(keys: np.ndarray, field: str, k: int) -> np.ndarray:
    return np.asarray(keys[field], np.float64).reshape(len(keys), k)


def _select(track: Track, interval, global_sequences, k: int):
    """Keys of `track` that play in `interval`: None (default), ("const", value) or ("anim", ...)."""
    if interval is None:
        return None
    keys = track.keys
    frames = np.asarray(keys["frame"], np.int64)
    gs = int(track.global_sequence_id)
    if 0 <= gs < len(global_sequences):
        duration = int(global_sequences[gs])
        if len(keys) == 0:
            return None
        if duration <= 0 or frames[0] > duration:
            return ("const", _values(keys[:1], "value", k)[0])
        lo, hi, clock = 0, duration, 1 + gs
    else:
        lo, hi, clock = int(interval[0]), int(interval[1]), 0
    inside = np.flatnonzero((frames >= lo) & (frames <= hi))
    if len(inside) == 0:
        return None
    inside = inside[np.argsort(frames[inside], kind="stable")]
    sel = keys[inside]
    values = _values(sel, "value", k)
    if len(sel) == 1 or np.all(values == values[0]):
        return ("const", values[0])
    if track.interpolation >= 2 and "in_tan" in keys.dtype.names:
        tin, tout = _values(sel, "in_tan", k), _values(sel, "out_tan", k)
    else:
        tin = tout = np.zeros_like(values)
    return ("anim", frames[inside].astype(np.float64), values, tin, tout, lo, hi - lo, clock)


class _Plan:
    """All tracks of one TrackSet, filtered for one interval and concatenated."""

    def __init__(self, tracks, defaults, statics, interval, global_sequences, k, quaternion):
        self.const = (statics if interval is None else defaults).copy()
        rows, segs = [], []
        for row, track in enumerate(tracks):
            sel = _select(track, interval, global_sequences, k)
            if sel is None:
                continue
            if sel[0] == "const":
                self.const[row] = sel[1]
                continue
            rows.append(row)
            segs.append((sel, effective_interpolation(track)))
        self.count = len(rows)
        if not rows:
            return
        n = np.array([len(s[0][1]) for s in segs], np.int64)
        span = np.array([s[0][6] for s in segs], np.float64)
        lo = np.array([s[0][5] for s in segs], np.float64)
        self.rows = np.array(rows, np.int64)
        self.n = n
        self.start = np.concatenate([[0], np.cumsum(n)[:-1]]).astype(np.int64)
        self.lo, self.span = lo, span
        # Composite keys: each track's frames shifted into its own disjoint range, so one sorted
        # array and one searchsorted find the bracketing key of every track at once.
        gap = span + 2.0
        self.base = np.concatenate([[0.0], np.cumsum(gap)[:-1]])
        self.frames = np.concatenate([s[0][1] for s in segs])
        seg_of_key = np.repeat(np.arange(len(segs)), n)
        self.composite = self.frames - lo[seg_of_key] + self.base[seg_of_key]
        self.values = np.concatenate([s[0][2] for s in segs])
        self.in_tan = np.concatenate([s[0][3] for s in segs])
        self.out_tan = np.concatenate([s[0][4] for s in segs])
        self.clock = np.array([s[0][7] for s in segs], np.int64)
        interp = np.array([s[1] for s in segs], np.int64)
        self.interp = interp
        self.basis = _BASIS[interp]  # (A, 4, 4)
        self.quaternion = quaternion
        self.stepped = np.flatnonzero(interp == INTERP_NONE)
        self.squad = np.flatnonzero(interp >= INTERP_HERMITE)

    def subset(self, keep: np.ndarray) -> _Plan:
        """This plan for the tracks `keep` only (sorted, unique rows): row j samples bit for bit as row
        keep[j] here. The kept tracks keep their composite keys (offsets and all), so each search
        finds the same key and every later operation is the same per-row one."""
        sub = _Plan.__new__(_Plan)
        sub.const = self.const[keep]
        sub.count = 0
        if self.count == 0 or len(keep) == 0:
            return sub
        pos = np.minimum(np.searchsorted(keep, self.rows), len(keep) - 1)
        segs = np.flatnonzero(keep[pos] == self.rows)
        sub.count = len(segs)
        if not len(segs):
            return sub
        sub.rows, sub.n = pos[segs], self.n[segs]
        sub.start = np.concatenate([[0], np.cumsum(sub.n)[:-1]]).astype(np.int64)
        sub.lo, sub.span, sub.base = self.lo[segs], self.span[segs], self.base[segs]
        key_rows = np.repeat(self.start[segs] - sub.start, sub.n) + np.arange(int(sub.n.sum()))
        for name in ("frames", "composite", "values", "in_tan", "out_tan"):
            setattr(sub, name, getattr(self, name)[key_rows])
        sub.clock, sub.interp, sub.basis = self.clock[segs], self.interp[segs], self.basis[segs]
        sub.quaternion = self.quaternion
        sub.stepped = np.flatnonzero(sub.interp == INTERP_NONE)
        sub.squad = np.flatnonzero(sub.interp >= INTERP_HERMITE)
        return sub

    def sample(self, clock: Clock) -> np.ndarray:
        out = self.const.copy()
        if self.count == 0:
            return out
        times = np.empty(1 + len(clock.global_times))
        times[0] = clock.frame
        times[1:] = clock.global_times
        T = times[self.clock]
        q = self.base + np.clip(T - self.lo, -0.5, self.span + 0.5)
        c = np.searchsorted(self.composite, q, side="right") - self.start  # keys at or before T
        wrap = (c <= 0) | (c >= self.n)
        i0 = np.where(wrap, self.n - 1, c - 1) + self.start
        i1 = np.where(wrap, 0, c) + self.start
        f0, f1 = self.frames[i0], self.frames[i1]
        delta = f1 - f0
        backwards = delta < 0
        delta = np.where(backwards, delta + self.span, delta)
        start = np.where(backwards & (T < f0), f1, f0)
        t = np.divide(T - start, delta, out=np.zeros_like(T), where=delta != 0)
        p0, p1 = self.values[i0], self.values[i1]
        if self.quaternion:
            res = quat.slerp(p0, p1, t)
            if len(self.stepped):
                res[self.stepped] = p0[self.stepped]
            if len(self.squad):
                s = self.squad
                ts = t[s]
                tan = quat.slerp(self.out_tan[i0[s]], self.in_tan[i1[s]], ts)
                res[s] = quat.slerp(res[s], tan, 2 * ts * (1 - ts))
        else:
            powers = np.stack([np.ones_like(t), t, t * t, t * t * t], axis=1)
            w = np.einsum("ai,aij->aj", powers, self.basis)
            res = (w[:, 0:1] * p0 + w[:, 1:2] * self.out_tan[i0] + w[:, 2:3] * self.in_tan[i1]
                   + w[:, 3:4] * p1)
            if len(self.stepped):
                res[self.stepped] = p0[self.stepped]  # exact, whatever the neighbours hold
        before = T < self.lo
        if before.any():
            res[before] = self.values[self.start[before]]
        out[self.rows] = res
        return out


class TrackSet:
    """Tracks with the same value width, compiled to be sampled together.

    `defaults[i]` is what track i gives where it has no key in the playing sequence, `statics[i]`
    what it shows with no sequence at all (default: `defaults`). Plans (the keys each track keeps for
    one interval) are built on first use and cached per interval.
    """

    def __init__(self, tracks: list[Track], defaults, global_sequences=(), quaternion: bool | None = None,
                 statics=None):
        self.tracks = list(tracks)
        widths = {value_width(t.tag) for t in self.tracks}
        if len(widths) > 1:
            raise ValueError(f"tracks of different widths in one TrackSet: {sorted(widths)}")
        self.width = widths.pop() if widths else 1
        self.defaults = np.asarray(defaults, np.float64).reshape(len(self.tracks), self.width)
        self.statics = self.defaults if statics is None else np.asarray(statics, np.float64).reshape(
            len(self.tracks), self.width)
        self.global_sequences = tuple(int(d) for d in global_sequences)
        if quaternion is None:
            quaternion = any(t.tag in QUATERNION_TAGS for t in self.tracks)
        self.quaternion = quaternion
        self._plans: dict = {}

    def __len__(self) -> int:
        return len(self.tracks)

    def plan(self, interval) -> _Plan:
        key = None if interval is None else (int(interval[0]), int(interval[1]))
        p = self._plans.get(key)
        if p is None:
            p = _Plan(self.tracks, self.defaults, self.statics, key, self.global_sequences, self.width,
                      self.quaternion)
            self._plans[key] = p
        return p

    def sample(self, clock: Clock) -> np.ndarray:
        """(n, width) float64 values of every track at `clock`."""
        return self.plan(clock.interval).sample(clock)


class TrackSubset:
    """The tracks `keep` (sorted, unique rows) of a TrackSet, sampled without the others: row j of
    `sample` is bit for bit row keep[j] of the set's (`_Plan.subset`, per interval, cached)."""

    def __init__(self, tracks: TrackSet, keep):
        self.tracks = tracks
        self.keep = np.asarray(keep, np.int64)
        self._plans: dict = {}

    def sample(self, clock: Clock) -> np.ndarray:
        key = None if clock.interval is None else (int(clock.interval[0]), int(clock.interval[1]))
        p = self._plans.get(key)
        if p is None:
            p = self._plans[key] = self.tracks.plan(clock.interval).subset(self.keep)
        return p.sample(clock)


class CompiledTrack:
    """One track, compiled (per interval, cached) for repeated sampling."""

    def __init__(self, track: Track, static=None, global_sequences=()):
        self.track = track
        d = default_value(track.tag, static)
        st = d if static is None else np.asarray(static, np.float64).reshape(d.shape)
        self._set = TrackSet([track], d[None], global_sequences, statics=st[None])

    def sample(self, clock: Clock) -> np.ndarray:
        return self._set.sample(clock)[0]


class TrackBank:
    """Every animated property of a model, grouped by value kind into TrackSets.

    `add` returns (group, row); after `freeze`, `sample(clock)` returns {group: (n, k) array}.
    """

    def __init__(self, global_sequences=()):
        self.global_sequences = tuple(int(d) for d in global_sequences)
        self._pending: dict[str, tuple[list, list, list]] = {}
        self.sets: dict[str, TrackSet] = {}

    @staticmethod
    def group_of(tag: str) -> str:
        return "quat" if tag in QUATERNION_TAGS else f"v{value_width(tag)}"

    def add(self, track: Track, static=None) -> tuple[str, int]:
        group = self.group_of(track.tag)
        tracks, defaults, statics = self._pending.setdefault(group, ([], [], []))
        d = default_value(track.tag, static)
        tracks.append(track)
        defaults.append(d)
        statics.append(d if static is None else np.asarray(static, np.float64).reshape(d.shape))
        return group, len(tracks) - 1

    def freeze(self) -> TrackBank:
        for group, (tracks, defaults, statics) in self._pending.items():
            self.sets[group] = TrackSet(tracks, np.array(defaults), self.global_sequences,
                                        quaternion=group == "quat", statics=np.array(statics))
        self._pending = {}
        return self

    def sample(self, clock: Clock) -> dict[str, np.ndarray]:
        return {group: s.sample(clock) for group, s in self.sets.items()}

    def still(self, interval) -> bool:
        """True when no track changes within `interval` (a sequence's [start, end], None: no sequence):
        `sample` then gives the same values at every clock of that interval."""
        return all(s.plan(interval).count == 0 for s in self.sets.values())

    def subset(self, keep: dict) -> BankSubset:
        """The rows keep[group] (sorted, unique) of each group named, sampled alone (`TrackSubset`)."""
        return BankSubset({g: TrackSubset(self.sets[g], rows) for g, rows in keep.items()})


class BankSubset:
    """Some tracks of a frozen TrackBank: `sample(clock)` gives {group: (len(keep[group]), k)}."""

    def __init__(self, subsets: dict[str, TrackSubset]):
        self.subsets = subsets

    def sample(self, clock: Clock) -> dict[str, np.ndarray]:
        return {group: s.sample(clock) for group, s in self.subsets.items()}


# ----------------------------------------------------------------------------- one-off sampling

_COMPILED: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def compiled(track: Track, static=None, global_sequences=()) -> CompiledTrack:
    """A cached CompiledTrack for `track` (rebuilt if the static value or global sequences differ)."""
    gs = tuple(int(d) for d in global_sequences)
    st = None if static is None else np.asarray(static, np.float64).reshape(-1)
    entry = _COMPILED.get(track)
    if entry is not None and entry[0] == gs and (
            (st is None and entry[1] is None) or (st is not None and entry[1] is not None
                                                  and np.array_equal(entry[1], st))):
        return entry[2]
    ct = CompiledTrack(track, st, gs)
    _COMPILED[track] = (gs, st, ct)
    return ct


def _shape(tag: str, v: np.ndarray):
    if tag in INTEGER_TAGS:
        return int(round(float(v[0])))
    if len(v) == 1:
        return float(v[0])
    return v


def sample_track(track: Track, sequence: Sequence | Clock | None, t_ms: float = 0.0, global_sequences=(),
                 static=None):
    """One track's value: a float (scalar tags), an int (KMTF, KRTX) or a float64 array (vectors)."""
    clock = sequence if isinstance(sequence, Clock) else make_clock(sequence, t_ms, global_sequences)
    return _shape(track.tag, compiled(track, static, global_sequences).sample(clock))


def value(obj_tracks: dict | None, tag: str, static_value, seq: Sequence | Clock | None, t: float = 0.0,
          global_sequences=()):
    """A static-or-animated property: the track `tag` of `obj_tracks` sampled at (seq, t) when present,
    else `static_value` (else the tag's default). `seq` is a Sequence (t in ms from its start), a Clock
    (t ignored) or None (no sequence: defaults).
    """
    track = obj_tracks.get(tag) if obj_tracks else None
    if track is None:
        v = default_value(tag) if static_value is None else np.asarray(static_value, np.float64).reshape(-1)
        return _shape(tag, v)
    clock = seq if isinstance(seq, Clock) else make_clock(seq, t, global_sequences)
    return _shape(tag, compiled(track, static_value, global_sequences).sample(clock))
