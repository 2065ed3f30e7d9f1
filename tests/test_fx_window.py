"""The effects time window (renderer.fx.window): the state at t depends only on a bounded window
before t, so any timestamp costs the same, batches in any order give the bytes of separate renders,
and absurd timestamps are refused."""

from __future__ import annotations

import math

import numpy as np
import pytest
from fx_util import fx_model, load, pre2, prem
from test_fx_sim import HASH, same_state, simulate

from renderer.anim import Animator
from renderer.anim.tracks import MAX_TIME_MS
from renderer.frame import FrameSpec
from renderer.fx import STEP_MS, Effects, Simulation
from renderer.fx.window import MAX_LIFETIME_MS, emission_count, window_start
from renderer.samples.build import effects

HUGE_TIMES = [3_600_000, 10**9 + 7, 10**12, 10**12 + 333, MAX_TIME_MS - 13]


def test_window_start_is_the_grid_point_a_lifetime_before():
    assert window_start(500, 1000) == 0
    assert window_start(10_000, 2500) == 7500
    assert window_start(10_007, 2500) == 7500
    assert window_start(10**12 + 333, 1000) % STEP_MS == 0 and 10**12 + 333 - window_start(10**12 + 333, 1000) < 1020


def test_emission_counts_telescope_to_floor_of_rate_times_t():
    for rate in (0.3, 10.0, 33.3, 1000.0):
        total = sum(emission_count(rate, k * STEP_MS, (k - 1) * STEP_MS, 10**9) for k in range(1, 501))
        assert total == math.floor(rate * 500 * STEP_MS / 1000)
    assert emission_count(float("nan"), 20, 0, 5) == 0 and emission_count(float("inf"), 20, 0, 5) == 5


def test_the_state_at_t_does_not_depend_on_where_the_simulation_started():
    model, _ = effects()
    anim = Animator(model)
    shared = Effects()
    compiled = shared.compiled(model, anim)
    assert compiled.window_ms == 2500  # the smoke's lifespan
    for t in [1234, 2990, 7777, 3_600_000, 10**12 + 333]:
        fresh = Effects()
        fresh._compiled[id(model)] = compiled
        want = fresh.at(model, anim, 0, t, 0, HASH, None)
        assert same_state(want, shared.at(model, anim, 0, t, 0, HASH, None))
        start = window_start(t, compiled.window_ms)
        assert want.start_ms == start
        for earlier in (start - STEP_MS, start - 37 * STEP_MS, 0):
            if earlier < 0 or t - earlier > 20_000:
                continue
            other = Simulation(compiled, anim, 0, 0, HASH, None, earlier).advance(anim, t)
            assert same_state(want, other), (t, earlier)
        assert sum(len(e.particles) for e in want.pre2) > 10 and len(want.ribbons[0].trail) > 5


def test_a_constant_rate_has_its_count_at_any_time(tmp_path):
    m = load(fx_model(tmp_path, "steady", pre2s=[pre2(1, emission_rate=10.0, lifespan=1.0)]))
    for t in (1000, 10**12, 10**12 + 10):
        p = simulate(m, t).pre2[0].particles
        assert len(p) == 10 and (t - p["birth"]).max() < 1000


def test_lifetimes_are_clamped_and_prem_lifetimes_bounded_by_their_track(tmp_path):
    from fx_util import track

    e = prem(1, lifespan=2.0, emission_rate=5.0)
    e.tracks["KPEL"] = track("KPEL", [0, 1000], [1.0, 3.0])
    long = pre2(2, lifespan=1e9)
    m = load(fx_model(tmp_path, "bounds", prems=[e], pre2s=[long]))
    fx = Effects()
    compiled = fx.compiled(m, Animator(m))
    assert compiled.prem[0].life_bound_ms == 3000.0
    assert compiled.pre2[0].lifespan_ms == MAX_LIFETIME_MS == compiled.window_ms


def test_batches_in_any_order_give_the_bytes_of_separate_renders(tmp_path):
    from render_util import renderer

    from renderer.samples import write_samples

    write_samples(tmp_path)
    model = load(tmp_path / "effects.mdx")
    times = [2999, 0, 10**12, 700, 700, 3_600_000 + 20, 10**12 - 20, 1234, 3_600_000, MAX_TIME_MS - 7, 250]
    r = renderer()
    r.reset_effects()
    spec = dict(width=40, height=40, camera="auto")
    batch = [r.render(model, FrameSpec(time_ms=t, **spec)).rgba for t in times]
    for t, got in zip(times, batch, strict=True):
        r.reset_effects()
        np.testing.assert_array_equal(r.render(model, FrameSpec(time_ms=t, **spec)).rgba, got, err_msg=f"t={t}")
    assert not np.array_equal(batch[2], batch[6])  # the effects really move at huge times


@pytest.mark.parametrize("t", [-1, -0.5, float("nan"), float("inf"), MAX_TIME_MS + 1, 10**30, "soon"])
def test_absurd_timestamps_are_refused(t):
    with pytest.raises(ValueError, match="timestamp"):
        FrameSpec(time_ms=t)
    model, _ = effects()
    with pytest.raises(ValueError, match="timestamp"):
        Effects().at(model, Animator(model), 0, t, 0, HASH, None)


@pytest.mark.corpus
def test_corpus_emitters_do_not_depend_on_where_the_simulation_started(corpus):
    from renderer.errors import FormatError
    from renderer.formats import load_model

    checked = 0
    for path in sorted(corpus.rglob("*.md[xl]")):
        try:
            model = load_model(path)
        except FormatError:
            continue
        if not (model.particle_emitters2 or model.particle_emitters or model.ribbon_emitters):
            continue
        anim = Animator(model)
        compiled = Effects().compiled(model, anim)
        if compiled.empty or compiled.window_ms > 6000:
            continue
        for seq in sorted({0, len(model.sequences) - 1}) if model.sequences else [None]:
            for t in (777, 9_999, 10**12 + 13):
                fresh = Effects()
                fresh._compiled[id(model)] = compiled
                want = fresh.at(model, anim, seq, t, 3, HASH, None)
                earlier = max(0.0, want.start_ms - 23 * STEP_MS)
                other = Simulation(compiled, anim, seq, 3, HASH, None, earlier).advance(anim, t)
                assert same_state(want, other), (path.name, seq, t)
        checked += 1
    assert checked >= 5, checked
