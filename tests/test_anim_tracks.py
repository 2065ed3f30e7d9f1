"""Track sampling: hand-computed values for every interpolation, the wrap quirk, global sequences,
step tracks, defaults, and a property test against a per-key port of the viewer's algorithm."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from renderer.anim.tracks import (
    STEP_TAGS,
    Clock,
    TrackBank,
    TrackSet,
    default_value,
    make_clock,
    sample_track,
    value,
)
from renderer.model import Sequence
from renderer.samples.build import track

SEQ = Sequence(name="A", interval=(0, 1000))


def q_z(deg):
    h = math.radians(deg) / 2
    return [0.0, 0.0, math.sin(h), math.cos(h)]


def at(tr, t, seq=SEQ, gs=()):
    return sample_track(tr, seq, t, gs)


# ------------------------------------------------------------------------------ interpolation


def test_none_linear_scalar():
    step = track("KMTA", [0, 100], [0.0, 10.0], interpolation=0)
    lin = track("KMTA", [0, 100], [0.0, 10.0], interpolation=1)
    seq = Sequence(interval=(0, 100))
    assert at(step, 99, seq) == 0.0
    assert at(lin, 25, seq) == pytest.approx(2.5)
    assert at(lin, 75, seq) == pytest.approx(7.5)


def test_hermite_scalar_uses_tangents_as_stored():
    # p0 = 0, p1 = 1, out-tangent of key 0 = 2, in-tangent of key 1 = 4; at t = 0.5:
    # a (t³-2t²+t) + b (t³-t²) + p1 (-2t³+3t²) = 2 * 0.125 + 4 * -0.125 + 0.5 = 0.25
    h = track("KMTA", [0, 1000], [0.0, 1.0], interpolation=2, in_tans=[9.0, 4.0], out_tans=[2.0, 9.0])
    assert at(h, 500) == pytest.approx(0.25)
    # t = 0.25: p0 w0 + a (t³-2t²+t) + b (t³-t²) + p1 (-2t³+3t²)
    t = 0.25
    expect = 2 * (t**3 - 2 * t**2 + t) + 4 * (t**3 - t**2) + (-2 * t**3 + 3 * t**2)
    assert at(h, 250) == pytest.approx(expect)


def test_bezier_scalar():
    b = track("KMTA", [0, 1000], [1.0, 2.0], interpolation=3, in_tans=[0.0, 5.0], out_tans=[3.0, 0.0])
    # 0.125 p0 + 0.375 a + 0.375 b + 0.125 p1 at t = 0.5
    assert at(b, 500) == pytest.approx(0.125 * 1 + 0.375 * 3 + 0.375 * 5 + 0.125 * 2)


def test_vectors_are_per_component():
    lin = track("KGTR", [0, 1000], [[0, 0, 0], [10, -20, 40]])
    np.testing.assert_allclose(at(lin, 250), [2.5, -5, 10])
    h = track("KGTR", [0, 1000], [[0, 0, 0], [1, 2, 3]], interpolation=2,
              in_tans=[[0, 0, 0], [4, 4, 4]], out_tans=[[2, 2, 2], [0, 0, 0]])
    # per component: 2*0.125 + 4*(-0.125) + p1*0.5
    np.testing.assert_allclose(at(h, 500), [0.25 - 0.5 + 0.5, 0.25 - 0.5 + 1.0, 0.25 - 0.5 + 1.5])
    bz = track("KGSC", [0, 1000], [[1, 1, 1], [2, 2, 2]], interpolation=3,
               in_tans=[[0, 0, 0], [1, 2, 3]], out_tans=[[3, 3, 3], [0, 0, 0]])
    np.testing.assert_allclose(at(bz, 500), [0.125 + 1.125 + 0.375 * c + 0.25 for c in (1, 2, 3)])


def test_quaternion_linear_is_shortest_arc_slerp():
    q = track("KGRT", [0, 1000], [q_z(0), q_z(90)])
    np.testing.assert_allclose(at(q, 500), q_z(45), atol=1e-7)
    np.testing.assert_allclose(at(q, 250), q_z(22.5), atol=1e-7)
    # The same end rotation stored with the opposite sign: still the short way round.
    neg = track("KGRT", [0, 1000], [q_z(0), [-x for x in q_z(90)]])
    np.testing.assert_allclose(at(neg, 500), q_z(45), atol=1e-7)
    step = track("KGRT", [0, 1000], [q_z(0), q_z(90)], interpolation=0)
    np.testing.assert_allclose(at(step, 999), q_z(0))


@pytest.mark.parametrize("interp", [2, 3])
def test_quaternion_hermite_and_bezier_are_squad(interp):
    # slerp(slerp(p0, p1, .5), slerp(a, b, .5), 2 * .5 * .5) = slerp(45°, 90°, .5) = 67.5° about Z
    q = track("KGRT", [0, 1000], [q_z(0), q_z(90)], interpolation=interp,
              in_tans=[q_z(0), q_z(90)], out_tans=[q_z(90), q_z(0)])
    np.testing.assert_allclose(at(q, 500), q_z(67.5), atol=1e-7)
    # t = 0.25: slerp(22.5°, 90°, 0.375) = 22.5 + 0.375 * 67.5 = 47.8125°
    np.testing.assert_allclose(at(q, 250), q_z(22.5 + 0.375 * 67.5), atol=1e-7)


# ------------------------------------------------------------------------------ sequence rules


def test_keys_outside_the_sequence_are_ignored():
    tr = track("KMTA", [0, 1000, 1500, 2000], [0.0, 10.0, 100.0, 200.0])
    assert at(tr, 500) == pytest.approx(5.0)
    other = Sequence(interval=(1500, 2000))
    assert at(tr, 250, other) == pytest.approx(150.0)


def test_wrap_between_last_and_first_key_and_the_quirk_before_the_first():
    tr = track("KMTA", [200, 800], [0.0, 10.0])
    # after the last key: pair (800 -> 200), delta = (200 - 800) + 1000 = 400
    assert at(tr, 900) == pytest.approx(10 + (900 - 800) / 400 * (0 - 10))  # 7.5
    assert at(tr, 1000) == pytest.approx(5.0)
    assert at(tr, 800) == pytest.approx(10.0)
    # before the first key: start frame becomes the first key's, t = (100 - 200) / 400 = -0.25
    assert at(tr, 100) == pytest.approx(10 + (-0.25) * (0 - 10))  # 12.5, the game's quirk
    assert at(tr, 0) == pytest.approx(15.0)
    assert at(tr, 200) == pytest.approx(0.0)


def test_constant_and_empty_sequences():
    one = track("KMTA", [300], [0.25])
    assert at(one, 0) == 0.25 and at(one, 900) == 0.25
    same = track("KGTR", [0, 500, 1000], [[1, 2, 3]] * 3)
    np.testing.assert_array_equal(at(same, 700), [1, 2, 3])
    none_here = track("KMTA", [5000, 6000], [0.0, 0.5])
    assert at(none_here, 100) == 1.0  # KMTA default
    rot = track("KGRT", [5000], [q_z(30)])
    np.testing.assert_array_equal(at(rot, 100), [0, 0, 0, 1])
    ral = track("KRAL", [5000], [0.5])
    assert at(ral, 100) == 0.0  # ribbon alpha defaults to 0
    kmte = track("KMTE", [5000], [0.5])
    assert value({"KMTE": kmte}, "KMTE", 0.7, SEQ, 100) == pytest.approx(0.7)  # no table default: static


def test_time_rule_wraps_looping_and_holds_non_looping():
    loop = Sequence(interval=(100, 300), flags=0)
    once = Sequence(interval=(100, 300), flags=1)
    assert make_clock(loop, 50).frame == 150
    assert make_clock(loop, 200).frame == 300
    assert make_clock(loop, 250).frame == 150
    assert make_clock(once, 250).frame == 300
    with pytest.raises(ValueError):
        make_clock(loop, -1)
    assert make_clock(None, 10, [100]).interval is None


# ------------------------------------------------------------------------------ global sequences


def test_global_sequence_runs_on_its_own_clock():
    tr = track("KMTA", [0, 1000], [0.0, 10.0], global_sequence_id=0)
    gs = [1000]
    # t = 2250 ms: global time 250, whatever the sequence and its interval
    assert at(tr, 2250, Sequence(interval=(5000, 9000)), gs) == pytest.approx(2.5)
    assert at(tr, 2250, Sequence(interval=(0, 100), flags=1), gs) == pytest.approx(2.5)
    assert at(tr, 999.5, SEQ, gs) == pytest.approx(9.995)
    clock = make_clock(SEQ, 2250, gs)
    assert clock.global_times == (250.0,)


def test_global_sequence_of_duration_zero_or_first_key_beyond_it_is_constant():
    zero = track("KMTA", [0, 50], [0.3, 0.9], global_sequence_id=1)
    assert at(zero, 25, SEQ, [1000, 0]) == pytest.approx(0.3)
    beyond = track("KMTA", [2000, 3000], [0.4, 0.8], global_sequence_id=0)
    assert at(beyond, 500, SEQ, [1000]) == pytest.approx(0.4)
    missing = track("KMTA", [0, 1000], [0.0, 1.0], global_sequence_id=7)  # no such global sequence
    assert at(missing, 500, SEQ, [1000]) == pytest.approx(0.5)


# ------------------------------------------------------------------------------ step tracks


@pytest.mark.parametrize("tag", ["KLAV", "KATV", "KPEV", "KP2V", "KRVS"])
def test_visibility_tracks_always_step(tag):
    tr = track(tag, [0, 100, 200], [1.0, 0.0, 1.0], interpolation=1)
    seq = Sequence(interval=(0, 300))
    assert at(tr, 50, seq) == 1.0
    assert at(tr, 100, seq) == 0.0
    assert at(tr, 199, seq) == 0.0
    assert at(tr, 250, seq) == 1.0
    assert tag in STEP_TAGS


@pytest.mark.parametrize("tag", ["KMTF", "KRTX"])
def test_integer_tracks_never_interpolate(tag):
    tr = track(tag, [0, 100], [0, 4], interpolation=1)
    seq = Sequence(interval=(0, 200))
    assert at(tr, 75, seq) == 0
    assert at(tr, 100, seq) == 4
    assert isinstance(at(tr, 100, seq), int)
    h = track(tag, [0, 100], [2, 9], interpolation=2)
    assert at(h, 99, seq) == 2


def test_value_static_or_animated():
    tr = track("KMTA", [0, 1000], [0.0, 1.0])
    assert value({}, "KMTA", 0.4, SEQ, 500) == 0.4
    assert value({"KMTA": tr}, "KMTA", 0.4, SEQ, 500) == pytest.approx(0.5)
    assert value({"KMTA": tr}, "KMTA", 0.4, None, 500) == 0.4  # no sequence: the static value
    assert value(None, "KGSC", None, SEQ, 0).tolist() == [1, 1, 1]
    tex = track("KMTF", [5000], [3], interpolation=0)
    assert value({"KMTF": tex}, "KMTF", 2, SEQ, 10) == 2  # KMTF default = the static texture id


def test_compiled_plans_are_reused():
    s = TrackSet([track("KMTA", [0, 1000], [0.0, 1.0])], [[1.0]])
    c = make_clock(SEQ, 100)
    s.sample(c)
    plan = s.plan(SEQ.interval)
    s.sample(make_clock(SEQ, 200))
    assert s.plan(SEQ.interval) is plan


# ------------------------------------------------------------------------------ property test
# A literal per-key port of the viewer's SdSequence (sd.ts) with our clock, as an oracle.


def _ref_slerp(a, b, t):
    a, b = list(a), list(b)
    cos = sum(x * y for x, y in zip(a, b, strict=True))
    if cos < 0:
        cos, b = -cos, [-x for x in b]
    if 1 - cos > 1e-6:
        om = math.acos(min(1.0, cos))
        s0, s1 = math.sin((1 - t) * om) / math.sin(om), math.sin(t * om) / math.sin(om)
    else:
        s0, s1 = 1 - t, t
    return [s0 * x + s1 * y for x, y in zip(a, b, strict=True)]


def ref_sample(tr, clock: Clock, gsd, static=None):
    k = len(default_value(tr.tag))
    default = list(default_value(tr.tag, static))
    if clock.interval is None:
        return default if static is None else list(np.reshape(static, k))
    frames = [int(f) for f in tr.keys["frame"]]
    vals = [list(np.reshape(np.asarray(v, float), k)) for v in tr.keys["value"]]
    ins = outs = None
    if tr.interpolation >= 2:
        ins = [list(np.reshape(np.asarray(v, float), k)) for v in tr.keys["in_tan"]]
        outs = [list(np.reshape(np.asarray(v, float), k)) for v in tr.keys["out_tan"]]
    gs = tr.global_sequence_id
    if 0 <= gs < len(gsd):
        if not frames:
            return default
        if gsd[gs] <= 0 or frames[0] > gsd[gs]:
            return vals[0]
        start, end, time = 0, gsd[gs], clock.global_times[gs]
    else:
        (start, end), time = clock.interval, clock.frame
    keep = sorted((i for i in range(len(frames)) if start <= frames[i] <= end), key=lambda i: frames[i])
    if not keep:
        return default
    F = [frames[i] for i in keep]
    V = [vals[i] for i in keep]
    if len(keep) == 1 or all(v == V[0] for v in V) or time < start:
        return V[0]
    n = len(F)
    if time < F[0] or time >= F[-1]:
        i0, i1 = n - 1, 0
    else:
        i0 = next(i for i in range(1, n) if F[i] > time) - 1
        i1 = i0 + 1
    sf, ef = F[i0], F[i1]
    dt = ef - sf
    if dt < 0:
        dt += end - start
        if time < sf:
            sf = ef
    t = 0.0 if dt == 0 else (time - sf) / dt
    interp = 0 if tr.tag in STEP_TAGS or not 0 <= tr.interpolation <= 3 else tr.interpolation
    p0, p1 = V[i0], V[i1]
    if interp == 0:
        return p0
    a = outs[keep[i0]] if interp >= 2 else None
    b = ins[keep[i1]] if interp >= 2 else None
    if tr.tag in ("KGRT", "KTAR"):
        if interp == 1:
            return _ref_slerp(p0, p1, t)
        return _ref_slerp(_ref_slerp(p0, p1, t), _ref_slerp(a, b, t), 2 * t * (1 - t))
    if interp == 1:
        return [x + t * (y - x) for x, y in zip(p0, p1, strict=True)]
    if interp == 2:
        f1, f2, f3, f4 = 2 * t**3 - 3 * t**2 + 1, t**3 - 2 * t**2 + t, t**3 - t**2, -2 * t**3 + 3 * t**2
    else:
        f1, f2, f3, f4 = (1 - t) ** 3, 3 * t * (1 - t) ** 2, 3 * t * t * (1 - t), t**3
    return [f1 * x + f2 * y + f3 * z + f4 * w for x, y, z, w in zip(p0, a, b, p1, strict=True)]


def _unit(v):
    n = math.sqrt(sum(x * x for x in v))
    return [x / n for x in v] if n > 1e-3 else [0.0, 0.0, 0.0, 1.0]


@st.composite
def tracks(draw, tag):
    k = len(default_value(tag))
    n = draw(st.integers(0, 6))
    interp = draw(st.integers(0, 3))
    frames = draw(st.lists(st.integers(-50, 1500), min_size=n, max_size=n))
    small = st.integers(-4, 4).map(float)

    def val():
        if tag in ("KGRT", "KTAR"):
            return _unit(draw(st.lists(small, min_size=4, max_size=4)))
        if tag in ("KMTF", "KRTX"):
            return [float(draw(st.integers(0, 5)))]
        return draw(st.lists(small, min_size=k, max_size=k))

    values = [val() for _ in range(n)]
    ins = [val() for _ in range(n)]
    outs = [val() for _ in range(n)]
    gs = draw(st.sampled_from([-1, -1, 0, 1]))
    if tag in ("KMTF", "KRTX"):
        values = [[int(x) for x in v] for v in values]
        ins, outs = values, values
    return track(tag, frames, values, interpolation=interp, global_sequence_id=gs, in_tans=ins, out_tans=outs)


TAGS = ["KMTA", "KGTR", "KGRT", "KATV", "KMTF"]


@settings(max_examples=300, deadline=None)
@given(data=st.data())
def test_vectorised_sampling_matches_the_per_key_reference(data):
    tag = data.draw(st.sampled_from(TAGS))
    group = data.draw(st.lists(tracks(tag), min_size=1, max_size=5))
    s = data.draw(st.integers(0, 600))
    e = s + data.draw(st.integers(0, 700))
    seq = Sequence(interval=(s, e), flags=data.draw(st.integers(0, 1)))
    gsd = [1000, 0]
    times = data.draw(st.lists(st.floats(0, 2500, allow_nan=False), min_size=1, max_size=4))
    bank = TrackBank(gsd)
    rows = [bank.add(t) for t in group]
    bank.freeze()
    for t_ms in times:
        clock = make_clock(seq, t_ms, gsd)
        got = bank.sample(clock)
        for tr, (g, row) in zip(group, rows, strict=True):
            np.testing.assert_allclose(got[g][row], ref_sample(tr, clock, gsd), rtol=1e-9, atol=1e-9)
    none = bank.sample(make_clock(None, 0, gsd))
    for tr, (g, row) in zip(group, rows, strict=True):
        np.testing.assert_allclose(none[g][row], default_value(tr.tag))
