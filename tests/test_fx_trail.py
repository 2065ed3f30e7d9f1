"""The engine-level trail module (renderer.fx.trail): the rules, one at a time, with no MDX involved."""

from __future__ import annotations

import numpy as np
import pytest

from renderer.fx import STEP_MS
from renderer.fx.trail import ACCUMULATOR_CLAMP, BURST_WINDOW_MS, STALE_MS, Trail


def edge(x, y=0.0, z=0.0, half=5.0):
    return np.array([x, y, z + half]), np.array([x, y, z - half])


def run(trail, stamps, pos=lambda t: edge(t / 10.0), **kw):
    emitted = []
    for t in stamps:
        a, b = pos(t)
        emitted.append(trail.advance(t, a, b, **kw))
    return emitted


def test_first_advance_only_records_the_stamp():
    tr = Trail(lifespan_s=1.0, rate=100)
    assert tr.advance(0, *edge(0)) == 0
    assert tr.stamp == 0 and len(tr) == 0 and tr.accumulator == 0


def test_rate_is_edges_per_second_and_lifespan_expires_them():
    tr = Trail(lifespan_s=0.5, rate=50)  # one edge per 20 ms
    run(tr, range(0, 1001, 20))
    # Edges born at 520 .. 1000 are younger than 500 ms.
    assert len(tr) == 25
    strip = tr.strip()
    np.testing.assert_allclose(strip.age_s, (1000 - np.arange(520, 1001, 20)) / 1000)


def test_fractional_rates_accumulate_exactly():
    tr = Trail(lifespan_s=10.0, rate=30)  # 0.6 edges per 20 ms step
    emitted = run(tr, range(0, 1001, 20))
    assert sum(emitted) == 30
    assert emitted[1:6] == [0, 1, 0, 1, 1]  # 0.6, 1.2 -> 0.2, 0.8, 1.4 -> 0.4, 1.0


def test_u_is_age_over_lifespan_and_new_edges_do_not_rescale_old_ones():
    tr = Trail(lifespan_s=0.4, rate=50)
    run(tr, range(0, 201, 20))
    before = tr.strip()
    np.testing.assert_allclose(before.u, before.age_s / 0.4)
    assert before.u[0] == pytest.approx(180 / 400)  # oldest (born at 20 ms) towards the cell's end
    assert before.u[-1] == 0.0  # newest
    tr.advance(220, *edge(22.0))
    after = tr.strip()
    # Every edge that was there keeps U = its age / lifespan: U only grows with time.
    np.testing.assert_allclose(after.u[:-1], before.u + 20 / 400)


def test_colour_and_alpha_are_captured_when_an_edge_is_emitted():
    tr = Trail(lifespan_s=1.0, rate=50)
    for t in range(0, 401, 20):
        colour = (1.0, 0.0, 0.0) if t < 200 else (0.0, 1.0, 0.0)
        tr.advance(t, *edge(t / 10.0), color=colour, alpha=0.25 if t < 200 else 0.75)
    strip = tr.strip()
    born = np.arange(20, 401, 20)
    np.testing.assert_array_equal(strip.color[born < 200], [[1.0, 0.0, 0.0]] * int((born < 200).sum()))
    np.testing.assert_array_equal(strip.color[born >= 200], [[0.0, 1.0, 0.0]] * int((born >= 200).sum()))
    np.testing.assert_array_equal(strip.alpha, np.where(born < 200, 0.25, 0.75))


def test_a_redraw_at_the_same_stamp_is_dt_zero():
    tr = Trail(lifespan_s=1.0, rate=50)
    run(tr, range(0, 301, 20))
    strip, acc, advances = tr.strip(), tr.accumulator, tr.advances
    assert tr.advance(300, *edge(999.0)) == 0  # a second pass: nothing emitted, nothing aged
    again = tr.strip()
    assert len(again) == len(strip) and tr.accumulator == acc and tr.advances == advances
    np.testing.assert_array_equal(again.above, strip.above)
    np.testing.assert_array_equal(again.u, strip.u)


def test_a_gap_past_250_ms_with_a_live_stamp_clears_the_trail():
    tr = Trail(lifespan_s=5.0, rate=50)
    run(tr, range(0, 201, 20))
    assert len(tr) == 10
    # Exactly 250 ms later is not stale: the accumulator clamp applies instead (2 + one 20 ms step).
    assert tr.advance(200 + STALE_MS, *edge(50.0)) == 3
    assert len(tr) == 13 and tr.clears == 0
    # More than 250 ms: the old edges are stale and go; the trail restarts at the new stamp.
    assert tr.advance(450 + STALE_MS + 1, *edge(80.0)) == 0
    assert len(tr) == 0 and tr.clears == 1 and tr.stamp == 701
    assert tr.advance(721, *edge(81.0)) == 1


def test_going_back_in_time_clears_too():
    tr = Trail(lifespan_s=5.0, rate=50)
    run(tr, range(0, 201, 20))
    tr.advance(100, *edge(0.0))
    assert len(tr) == 0 and tr.stamp == 100


def test_accumulator_is_clamped_at_two_past_one_burst_window_before_emitting():
    tr = Trail(lifespan_s=5.0, rate=1000)
    tr.advance(0, *edge(0))
    # a hitch: 200 edges owed; emitted: ACCUMULATOR_CLAMP + what one 20 ms advance owes (20)
    assert tr.advance(200, *edge(1.0)) == ACCUMULATOR_CLAMP + 1000 * BURST_WINDOW_MS / 1000 == 22
    assert tr.accumulator == 0.0
    assert tr.advance(201, *edge(2.0)) == 1
    slow = Trail(lifespan_s=5.0, rate=10)
    slow.advance(0, *edge(0))
    assert slow.advance(240, *edge(1.0)) == 2  # 2.4 owed, 2.2 allowed: no burst of coincident edges


def test_the_burst_window_covers_the_simulation_step():
    assert BURST_WINDOW_MS >= STEP_MS


@pytest.mark.parametrize("step", [STEP_MS, 10, 1])
def test_a_steady_ribbon_keeps_its_authored_rate(step):
    tr = Trail(lifespan_s=0.45, rate=150)  # old clamp: at most 2 edges per 20 ms = 100 per second
    emitted = run(tr, range(0, 2001, step))
    assert sum(emitted) == 300  # 150 per second over 2 s
    assert 67 <= len(tr) <= 69  # rate x lifespan = 67.5 live edges at steady state


def test_hidden_emitters_neither_accumulate_nor_emit_but_edges_still_age():
    tr = Trail(lifespan_s=0.1, rate=50)
    run(tr, range(0, 101, 20))
    assert len(tr) == 5
    run(tr, range(120, 241, 20), emit=False)
    assert len(tr) == 0 and tr.accumulator == 0.0


def test_the_strip_has_length_zero_until_the_node_moves():
    tr = Trail(lifespan_s=1.0, rate=50)
    still = run(tr, range(0, 201, 20), pos=lambda t: edge(3.0))
    assert sum(still) == 10 and tr.strip().length == 0.0
    run(tr, range(220, 301, 20), pos=lambda t: edge(3.0 + (t - 200) / 10.0))
    assert tr.strip().length == pytest.approx(10.0)  # from x = 3 (at rest) to x = 13 (at 300 ms)


def test_gravity_pulls_live_edges_down_world_z_exactly():
    coarse, fine = Trail(lifespan_s=1.0, rate=10, gravity=100.0), Trail(lifespan_s=1.0, rate=10, gravity=100.0)
    run(coarse, [0, 100, 200, 300, 400, 500], pos=lambda t: edge(0.0))
    run(fine, range(0, 501, 20), pos=lambda t: edge(0.0))
    s = coarse.strip()
    # Edge born at 100 ms: age 0.4 s at 500 ms -> 0.5 * 100 * 0.16 = 8 units down.
    np.testing.assert_allclose(s.above[0], [0.0, 0.0, 5.0 - 8.0])
    np.testing.assert_allclose(s.below[:, 2], -5.0 - 50.0 * s.age_s ** 2)
    # How often the trail was advanced does not change where its edges hang.
    f = fine.strip()
    np.testing.assert_allclose(f.above[f.age_s == 0.4], s.above[s.age_s == 0.4])


def test_copies_are_independent():
    tr = Trail(lifespan_s=1.0, rate=50)
    run(tr, range(0, 201, 20))
    cp = tr.copy()
    cp.advance(220, *edge(50.0))
    assert len(tr) == 10 and len(cp) == 11 and tr.stamp == 200
    np.testing.assert_array_equal(cp.strip().above[:-1], tr.strip().above)
