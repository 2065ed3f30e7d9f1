"""Particle and ribbon simulation on the CPU (no GL): determinism, the fixed step, and the PRE2 / PREM /
RIBB rules of renderer.fx, checked on hand-built emitters."""

from __future__ import annotations

import math

import numpy as np
import pytest
from fx_util import fx_model, load, orbit, pre2, prem, ribbon, track

from renderer.anim import Animator
from renderer.fx import STEP_MS, Effects
from renderer.fx.pre2 import atlas_cells, fires
from renderer.fx.rng import emitter_seed
from renderer.fx.trail import ACCUMULATOR_CLAMP, BURST_WINDOW_MS
from renderer.model import Sequence
from renderer.samples.build import effects

HASH = "0" * 64


def simulate(model, t_ms, sequence=0, seed=0, fx=None, digest=HASH):
    fx = fx or Effects()
    return fx.at(model, Animator(model), sequence, t_ms, seed, digest, None)


def state(sim) -> list[np.ndarray]:
    out = []
    for e in sim.pre2 + sim.prem:
        p = e.particles
        out += [p[name].copy() for name in p.fields]
    for r in sim.ribbons:
        s = r.trail.strip()
        out += [s.above, s.below, s.color, s.alpha, s.u]
    return out


def same_state(a, b) -> bool:
    sa, sb = state(a), state(b)
    return len(sa) == len(sb) and all(x.shape == y.shape and np.array_equal(x, y) for x, y in zip(sa, sb, strict=True))


# ------------------------------------------------------------------------------------- determinism


def test_seeds_depend_on_hash_kind_index_and_instance_seed():
    base = emitter_seed(HASH, "PRE2", 0, 0)
    assert base == emitter_seed(HASH, "PRE2", 0, 0)
    others = {emitter_seed("1" * 64, "PRE2", 0, 0), emitter_seed(HASH, "PREM", 0, 0),
              emitter_seed(HASH, "PRE2", 1, 0), emitter_seed(HASH, "PRE2", 0, 1)}
    assert base not in others and len(others) == 4


def test_the_state_at_t_does_not_depend_on_what_was_simulated_before():
    model, _ = effects()
    shared = Effects()
    times = [0, 250, 333, 700, 1234, 1500, 2990]
    for t in times:
        sim = simulate(model, t, fx=shared)  # valid until the next call: compare now
        assert sim.t_ms == t
        assert same_state(sim, simulate(model, t)), t
    assert shared.restarts == 1  # one simulation carried through the whole batch
    assert sum(len(e.particles) for e in sim.pre2) > 20 and len(sim.ribbons[0].trail) > 5


def test_off_grid_times_leave_the_stored_state_on_the_grid():
    model, _ = effects()
    fx = Effects()
    a = simulate(model, 333, fx=fx)
    stored = next(iter(fx._sims.values()))
    assert a is not stored and a.t_ms == 333 and stored.t_ms == 320 == 16 * STEP_MS
    b = simulate(model, 333, fx=fx)  # the same frame again: the same state, the stored one untouched
    assert same_state(a, b) and stored.t_ms == 320


def test_earlier_times_and_other_sequences_restart():
    model, _ = effects()
    fx = Effects()
    simulate(model, 1000, fx=fx)
    simulate(model, 500, fx=fx)
    assert fx.restarts == 2
    birth = simulate(model, 500, sequence=1, fx=fx)
    assert fx.restarts == 3 and birth.sequence == 1
    assert same_state(simulate(model, 500, fx=fx), simulate(model, 500))


def test_instance_seed_and_model_hash_change_the_particles_not_their_number():
    model, _ = effects()
    fx = Effects()
    a = simulate(model, 1500, fx=fx)
    before = state(a)
    b, c = simulate(model, 1500, seed=7, fx=fx), simulate(model, 1500, digest="f" * 64, fx=fx)
    assert fx.restarts == 3 and all(np.array_equal(x, y) for x, y in zip(before, state(a), strict=True))
    for other in (b, c):
        assert [len(e.particles) for e in a.pre2] == [len(e.particles) for e in other.pre2]
        assert other.ribbons[0].trail is not a.ribbons[0].trail  # trails belong to one instance
        assert not np.array_equal(a.pre2[0].particles["pos"], other.pre2[0].particles["pos"])


# ------------------------------------------------------------------------------------------- PRE2


def one(tmp_path, name="fx", sequences=None, **kw):
    e = pre2(1, **kw)
    return load(fx_model(tmp_path, name, pre2s=[e], sequences=sequences)), e


def test_emission_rate_is_particles_per_second_times_one(tmp_path):
    m, _ = one(tmp_path, emission_rate=10.0, lifespan=100.0)
    assert len(simulate(m, 1000).pre2[0].particles) == 10
    m, _ = one(tmp_path, "both", emission_rate=10.0, lifespan=100.0, head_or_tail=2)
    p = simulate(m, 1000).pre2[0].particles
    assert len(p) == 20 and p["tail"].sum() == 10 and not p["tail"][0] and p["tail"][1]


def test_each_particle_carries_its_emitters_filter_mode(tmp_path):
    a, b = pre2(1, filter_mode=1), pre2(2, filter_mode=0)
    m = load(fx_model(tmp_path, "two", pre2s=[a, b]))
    sim = simulate(m, 1000)
    assert set(sim.pre2[0].particles["blend"].tolist()) == {1}
    assert set(sim.pre2[1].particles["blend"].tolist()) == {0}


def test_lifespan_expires_particles(tmp_path):
    m, _ = one(tmp_path, emission_rate=50.0, lifespan=0.25)
    p = simulate(m, 1000).pre2[0].particles
    ages = 1000 - p["birth"]
    assert len(p) == 13 and ages.max() == 240 and ages.min() == 0  # age >= lifespan is gone


def test_spawn_area_latitude_and_speed(tmp_path):
    m, _ = one(tmp_path, emission_rate=200.0, lifespan=100.0, length=40.0, width=10.0, latitude=30.0, speed=100.0,
               variation=0.25)
    p = simulate(m, 2000).pre2[0].particles
    v, pos, age = p["vel"], p["pos"], (2000 - p["birth"]) / 1000
    start = pos - v * age[:, None]
    assert len(p) == 400
    assert np.abs(start[:, 0]).max() <= 20 and np.abs(start[:, 0]).max() > 18  # length 40 along X
    assert np.abs(start[:, 1]).max() <= 5 and np.abs(start[:, 1]).max() > 4.5  # width 10 along Y
    speed = np.linalg.norm(v, axis=1)
    assert speed.min() >= 75 - 1e-9 and speed.max() <= 125 + 1e-9
    cos_from_z = v[:, 2] / speed
    assert cos_from_z.min() >= math.cos(math.radians(30)) ** 2 - 1e-12  # cos a cos b
    assert np.abs(v[:, 0]).max() > 10  # X tilt present (not a line emitter)


def test_line_emitters_spread_in_one_plane(tmp_path):
    m, _ = one(tmp_path, emission_rate=100.0, lifespan=100.0, latitude=45.0, speed=10.0, flags=0x1000 | 0x20000)
    v = simulate(m, 1000).pre2[0].particles["vel"]
    # Rz(90) Ry(a) +Z = (0, sin a, cos a): no X component.
    np.testing.assert_allclose(v[:, 0], 0.0, atol=1e-12)
    assert np.abs(v[:, 1]).max() > 5


def test_gravity_integrates_exactly(tmp_path):
    m, _ = one(tmp_path, emission_rate=1.0, lifespan=100.0, speed=100.0, gravity=50.0)
    p = simulate(m, 1730).pre2[0].particles  # one particle born at 1000, age 0.73 s
    assert len(p) == 1
    age = 0.73
    v0 = p["vel"][0] + [0, 0, 50.0 * age]
    np.testing.assert_allclose(v0, [0, 0, 100.0], atol=1e-9)
    np.testing.assert_allclose(p["pos"][0], [0, 0, 100 * age - 25.0 * age * age], atol=1e-9)


def test_node_transform_places_world_space_particles_and_moves_model_space_ones(tmp_path):
    bone_move = track("KGTR", [0, 2000], [[0, 0, 0], [0, 200, 0]])
    for flags, follows in ((0x1000, False), (0x1000 | 0x80000, True)):
        e = pre2(1, emission_rate=1.0, lifespan=100.0, speed=0.0, flags=flags)
        e.node_tracks["KGTR"] = bone_move
        m = load(fx_model(tmp_path, f"space{flags}", pre2s=[e], pivots={1: (10, 0, 0)}))
        fx = Effects()
        a = simulate(m, 1000, fx=fx)
        world_a = a.world[1]
        inst_a, _ = a.pre2[0].instances(1000, world_a, np.eye(4))
        b = simulate(m, 1800, fx=fx)
        inst_b, _ = b.pre2[0].instances(1800, b.world[1], np.eye(4))
        np.testing.assert_allclose(inst_a[0, :3], [10, 100, 0], atol=1e-4)  # spawned where the node was
        assert (abs(inst_b[0, 1] - 180) < 1e-3) == follows  # the node moved on to y = 180


def test_non_looping_sequences_stop_emitting_past_their_end(tmp_path):
    seqs = [Sequence(name="Birth", interval=(0, 500), flags=1)]
    m, _ = one(tmp_path, sequences=seqs, emission_rate=10.0, lifespan=100.0)
    assert len(simulate(m, 2000).pre2[0].particles) == 5
    e = pre2(1, emission_rate=10.0, lifespan=100.0)
    e.tracks["KP2V"] = track("KP2V", [0], [1.0], interpolation=0, global_sequence_id=0)
    m = load(fx_model(tmp_path, "global", pre2s=[e], sequences=seqs, global_sequences=[300]))
    assert len(simulate(m, 2000).pre2[0].particles) == 20  # driven by a global sequence: keeps going


def test_visibility_track_gates_emission(tmp_path):
    e = pre2(1, emission_rate=10.0, lifespan=100.0)
    e.tracks["KP2V"] = track("KP2V", [0, 500], [1.0, 0.0], interpolation=0)
    m = load(fx_model(tmp_path, "vis", pre2s=[e]))
    assert len(simulate(m, 3000).pre2[0].particles) == 4  # at 100 .. 400; at 500 KP2V is already 0


def test_animated_length_and_width_drive_the_spawn_area(tmp_path):
    e = pre2(1, emission_rate=100.0, lifespan=100.0, speed=0.0)
    e.tracks["KP2N"] = track("KP2N", [0, 500], [0.0, 100.0], interpolation=0)  # length: local X
    m = load(fx_model(tmp_path, "area", pre2s=[e]))
    pos, birth = (simulate(m, 1000).pre2[0].particles[k] for k in ("pos", "birth"))
    assert np.abs(pos[birth < 500, 0]).max() == 0.0
    assert np.abs(pos[birth >= 500, 0]).max() > 40 and np.abs(pos[:, 1]).max() == 0.0


def test_squirt_fires_once_per_key_and_per_loop(tmp_path):
    seqs = [Sequence(name="Stand", interval=(0, 1000))]
    e = pre2(1, squirt=1, emission_rate=0.0, lifespan=100.0)
    e.tracks["KP2E"] = track("KP2E", [0, 500, 600], [0.0, 20.0, 0.0], interpolation=0)
    m = load(fx_model(tmp_path, "squirt", pre2s=[e], sequences=seqs))
    fx = Effects()
    counts = {t: len(simulate(m, t, fx=fx).pre2[0].particles) for t in (480, 500, 990, 1400, 1500, 2500)}
    assert counts == {480: 0, 500: 20, 990: 20, 1400: 20, 1500: 40, 2500: 60}
    births = simulate(m, 1500).pre2[0].particles["birth"]
    assert sorted(set(births.tolist())) == [500.0, 1500.0]
    # No KP2E key: the static rate at the sequence start and at every wrap.
    m, _ = one(tmp_path, "squirt2", sequences=seqs, squirt=1, emission_rate=3.0, lifespan=100.0)
    assert [len(simulate(m, t).pre2[0].particles) for t in (0, 999, 1000, 2000)] == [3, 3, 6, 9]


def test_squirt_schedule_counting():
    np.testing.assert_array_equal(fires([0, 500], [1000, 1000], -1, 0), [1, 0])
    np.testing.assert_array_equal(fires([0, 500], [1000, 1000], 0, 2600), [2, 3])
    np.testing.assert_array_equal(fires([500], [0], 0, 2600), [1])
    np.testing.assert_array_equal(fires([500], [0], 500, 2600), [0])


def test_atlas_interval_end_is_inclusive():
    f = np.linspace(0, 0.999, 64)
    # LargeFireEmitter: 8 x 8 cells, life {0, 31, 1}, decay {32, 63, 1}: every cell shows.
    life = atlas_cells(np.tile([0, 31, 1], (64, 1)), f, 64)
    decay = atlas_cells(np.tile([32, 63, 1], (64, 1)), f, 64)
    assert set(life.tolist()) == set(range(32)) and set(decay.tolist()) == set(range(32, 64))
    down = atlas_cells(np.tile([5, 2, 1], (4, 1)), np.array([0.0, 0.25, 0.5, 0.99]), 16)
    np.testing.assert_array_equal(down, [5, 4, 3, 2])
    twice = atlas_cells(np.tile([0, 3, 2], (4, 1)), np.array([0.0, 0.25, 0.5, 0.75]), 16)
    np.testing.assert_array_equal(twice, [0, 2, 0, 2])
    np.testing.assert_array_equal(atlas_cells(np.array([[0, 3, 0]]), np.array([0.5]), 16), [2])  # repeat 0 -> 1
    np.testing.assert_array_equal(atlas_cells(np.array([[0, 20, 1]]), np.array([0.99]), 16), [15])  # clamped


def test_segment_colour_alpha_scale_and_cells(tmp_path):
    m, _ = one(tmp_path, emission_rate=1.0, lifespan=1.0, speed=0.0, time=0.25, rows=2, columns=2,
               segment_colors=((1, 0, 0), (0, 1, 0), (0, 0, 1)), segment_alphas=(0, 200, 100),
               segment_scaling=(10, 20, 40), head_intervals=((0, 0, 1), (1, 3, 1)))
    for t, colour, alpha, scale, cell in ((1125, (0.5, 0.5, 0), 100, 15, 0), (1625, (0, 0.5, 0.5), 150, 30, 2)):
        sim = simulate(m, t)
        inst, _ = sim.pre2[0].instances(t, sim.world[1], np.eye(4))
        np.testing.assert_allclose(inst[0, 6:9], colour, atol=1e-6)
        assert inst[0, 9] == pytest.approx(alpha / 255)
        assert inst[0, 14] == pytest.approx(scale)
        u0, v0 = (cell % 2) / 2, (cell // 2) / 2
        np.testing.assert_allclose(inst[0, 10:14], [u0, v0, 0.5, 0.5])


def test_tails_and_xy_quads(tmp_path):
    m, _ = one(tmp_path, emission_rate=1.0, lifespan=10.0, speed=100.0, head_or_tail=2, tail_length=0.5,
               flags=0x1000 | 0x100000)
    sim = simulate(m, 1500)
    inst, _ = sim.pre2[0].instances(1500, sim.world[1], np.eye(4))
    head, tail = inst
    assert head[15] == 1.0 and tail[15] == 3.0  # XY head, flat tail
    np.testing.assert_allclose(tail[3:6], [0, 0, -50.0], atol=1e-4)  # -tailLength * v
    angle = math.atan2(0.0, 0.0) - math.pi + math.pi / 8
    np.testing.assert_allclose(head[3:5], [math.cos(angle), math.sin(angle)], atol=1e-6)


def test_sort_prims_far_z_draws_back_to_front(tmp_path):
    m, _ = one(tmp_path, emission_rate=20.0, lifespan=10.0, speed=50.0, latitude=80.0, flags=0x1000 | 0x10000)
    sim = simulate(m, 1000)
    view = np.eye(4)
    view[:3, :3] = [[0, 1, 0], [0, 0, 1], [1, 0, 0]]  # looking down -X
    view[2, 3] = -500
    inst, _ = sim.pre2[0].instances(1000, sim.world[1], view)
    depth = inst[:, :3].astype(np.float64) @ view[2, :3] + view[2, 3]
    assert np.all(np.diff(depth) >= 0) and depth[0] < depth[-1]


# ------------------------------------------------------------------------------------------- PREM


def test_prem_emits_with_latitude_longitude_and_captured_lifespan(tmp_path):
    e = prem(1, emission_rate=20.0, lifespan=10.0, speed=100.0, latitude=0.5, longitude=0.25, gravity=0.0)
    e.tracks["KPEL"] = track("KPEL", [0, 500], [10.0, 0.25], interpolation=0)
    m = load(fx_model(tmp_path, "prem", prems=[e]))
    sim = simulate(m, 1000)
    p = sim.prem[0].particles
    # 0.4 particles per 20 ms step: born at 60, 100, 160, 200, ...; the 9 born before 500 ms keep 10 s of
    # life, of those born later (0.25 s) the ones born after 750 ms live: 760, 800, 860, 900, 960, 1000.
    np.testing.assert_array_equal(p["birth"], [60, 100, 160, 200, 260, 300, 360, 400, 460, 760, 800, 860, 900, 960,
                                               1000])
    np.testing.assert_array_equal(p["life"], [10000.0] * 9 + [250.0] * 6)
    v = p["vel"]
    theta = np.arccos(np.clip(v[:, 2] / 100.0, -1, 1))
    phi = np.arctan2(v[:, 1], v[:, 0])
    assert theta.max() <= 0.5 + 1e-9
    assert np.abs(np.where(v[:, 0] < 0, np.abs(phi) - np.pi, phi)).max() <= 0.25 + 1e-9


# ------------------------------------------------------------------------------------------- RIBB


def ribbon_reference(rate: int, lifespan_ms: float, t_ms: int, visible=lambda t: True) -> list[int]:
    """Births of the live edges at t by the rules, stepping like the simulation."""
    acc, births = 0.0, []
    for k in range(1, t_ms // STEP_MS + 1):
        t = k * STEP_MS
        births = [b for b in births if t - b < lifespan_ms]
        if not visible(t):
            continue
        acc = min(acc + rate * STEP_MS, ACCUMULATOR_CLAMP * 1000.0 + rate * min(STEP_MS, BURST_WINDOW_MS))
        while acc >= 1000.0:
            births.append(t)
            acc -= 1000.0
    return births


@pytest.fixture
def circling(tmp_path):
    r = ribbon(2, 1, emission_rate=30, lifespan=0.5, height_above=4.0, height_below=6.0, rows=2, columns=2)
    r.tracks["KRCO"] = track("KRCO", [0, 600], [[1, 0, 0], [0, 1, 0]], interpolation=0)
    r.tracks["KRTX"] = track("KRTX", [0, 500], [1, 2], interpolation=0)
    r.tracks["KRAL"] = track("KRAL", [0], [0.5], interpolation=0)
    return load(fx_model(tmp_path, "circle", ribbons=[r], helpers=[orbit(1)], pivots={2: (50, 0, 20)},
                         sequences=[Sequence(name="Stand", interval=(0, 1000))]))


def test_ribbon_on_a_circle_follows_the_rules(circling):
    fx = Effects()
    cols = None
    for t in (0, 100, 480, 700, 1000, 1620):
        sim = simulate(circling, t, fx=fx)
        tr = sim.ribbons[0].trail
        strip = tr.strip()
        births = ribbon_reference(30, np.float32(0.5) * 1000.0, t)
        assert len(strip) == len(births), t
        np.testing.assert_allclose(strip.age_s, (t - np.array(births, float)) / 1000)
        np.testing.assert_allclose(strip.u, strip.age_s / 0.5)
        # Colours are the KRCO value when each edge was emitted (red before frame 600, then green).
        frames = np.array([b if b <= 1000 else b % 1000 for b in births])
        expect = np.where(frames[:, None] < 600, [1.0, 0, 0], [0, 1.0, 0]) if births else np.zeros((0, 3))
        np.testing.assert_array_equal(strip.color, expect)
        np.testing.assert_array_equal(strip.alpha, np.full(len(births), 0.5))
        # Edges sit on the circle of radius 50 at the angle of their birth time, +4 / -6 along the node's Y.
        for above, below, b in zip(strip.above, strip.below, births, strict=True):
            a = 2 * math.pi * (b % 1000) / 1000
            centre = np.array([50 * math.cos(a), 50 * math.sin(a), 20])
            tangent = np.array([-math.sin(a), math.cos(a), 0])
            np.testing.assert_allclose(above, centre + 4 * tangent, atol=1e-6)
            np.testing.assert_allclose(below, centre - 6 * tangent, atol=1e-6)
        cols = sim.fx.ribbon_table.columns
        verts = sim.ribbons[0].vertices(sim.params["RIBB"][0], cols)
        if len(births) >= 2:
            # KRTX now: cell 1 = (u 0.5, v 0), cell 2 = (u 0, v 0.5).
            slot = 1 if (t if t <= 1000 else t % 1000) < 500 else 2
            u0, v0 = (slot % 2) / 2, (slot // 2) / 2
            np.testing.assert_allclose(verts[0::2, 7], u0 + 0.5 * strip.u, atol=1e-6)
            np.testing.assert_allclose(verts[0::2, 8], v0)
            np.testing.assert_allclose(verts[1::2, 8], v0 + 0.5)
            np.testing.assert_allclose(verts[:, 3:7], np.repeat(np.c_[strip.color, strip.alpha], 2, axis=0), atol=1e-6)
        else:
            assert len(verts) == 0


def test_each_trail_advances_exactly_once_per_step_and_not_on_a_redraw(tmp_path):
    rs = [ribbon(2, 1, emission_rate=50), ribbon(3, 1, emission_rate=20, lifespan=1.0)]
    m = load(fx_model(tmp_path, "two", ribbons=rs, helpers=[orbit(1)], pivots={2: (30, 0, 0), 3: (0, 30, 0)}))
    fx = Effects()
    sim = simulate(m, 1000, fx=fx)
    assert [r.trail.advances for r in sim.ribbons] == [50, 50]
    again = simulate(m, 1000, fx=fx)  # dt = 0: same stamp, nothing advances or emits
    assert [r.trail.advances for r in again.ribbons] == [50, 50]
    assert same_state(sim, again)
    assert [len(r.trail) for r in sim.ribbons] == [25, 20]


def test_a_150_per_second_ribbon_is_not_capped_at_100(tmp_path):
    r = ribbon(2, 1, emission_rate=150, lifespan=0.45)
    m = load(fx_model(tmp_path, "fast", ribbons=[r], helpers=[orbit(1)], pivots={2: (30, 0, 0)}))
    for t in (1000, 1500):
        n = len(simulate(m, t).ribbons[0].trail)
        assert n == len(ribbon_reference(150, np.float32(0.45) * 1000.0, t))
        assert 66 <= n <= 69  # 150 x 0.45 = 67.5 (a clamp of 2 per step would leave 46)


def test_ribbons_need_alpha_and_visibility_to_emit(tmp_path):
    hidden = ribbon(2, 1)
    hidden.tracks["KRVS"] = track("KRVS", [0, 400], [1.0, 0.0], interpolation=0)
    clear = ribbon(3, 1)
    clear.tracks["KRAL"] = track("KRAL", [0], [0.0], interpolation=0)
    m = load(fx_model(tmp_path, "gates", ribbons=[hidden, clear], helpers=[orbit(1)]))
    sim = simulate(m, 450)
    assert len(sim.ribbons[0].trail) == len(ribbon_reference(50, 500.0, 450, lambda t: t < 400))
    assert len(sim.ribbons[1].trail) == 0


def test_ribbon_strip_of_a_still_node_has_length_zero(tmp_path):
    m = load(fx_model(tmp_path, "still", ribbons=[ribbon(1, 0)], pivots={1: (10, 0, 0)}))
    sim = simulate(m, 400)
    assert len(sim.ribbons[0].trail) == 20 and sim.ribbons[0].trail.strip().length == 0.0
