"""Particles and ribbons drawn by the renderer: blend arithmetic on pixels, smoke vs flame, batches
giving the bytes of separate renders, instanced draws, ribbons, PREM children and textured quads."""

from __future__ import annotations

import hashlib
import subprocess
import sys

import numpy as np
import pytest
from conftest import ROOT
from fx_util import fx_model, load, orbit, prem, ribbon, static_pre2, track, white
from render_util import FRONT_CAMERA, quad, renderer

from renderer.frame import FrameSpec, Renderer
from renderer.fx import FX_RULE
from renderer.model import Layer, Material, Sequence
from renderer.samples import write_samples

BG_HEX = "#4080c0"
BG = np.array([0x40, 0x80, 0xC0]) / 255.0


def render(model, t=1500, size=64, camera=FRONT_CAMERA, background=BG_HEX, r=None, **kw):
    r = r or renderer()
    return r.render(model, FrameSpec(time_ms=t, width=size, height=size, camera=camera, background=background, **kw))


@pytest.fixture(scope="module")
def samples(tmp_path_factory):
    d = tmp_path_factory.mktemp("fx-samples")
    write_samples(d)
    return d


# ---------------------------------------------------------------------------------- blend arithmetic


COLOR = np.array([200, 100, 50]) / 255.0


def expected(mode: int, alpha: float) -> np.ndarray:
    c, a = COLOR, alpha
    out = {
        0: c * a + BG * (1 - a),  # Blend
        1: np.minimum(c * a + BG, 1),  # Additive
        2: BG * c,  # Modulate
        3: np.minimum(2 * BG * c, 1),  # Modulate2x
        4: (c * a + BG * (1 - a)) if a >= 0.75 else BG,  # AlphaKey: alpha test 0.75, then Blend
    }[mode]
    return np.round(out * 255)


@pytest.mark.parametrize("mode,alpha", [(0, 128), (1, 128), (2, 128), (3, 128), (4, 200), (4, 128)],
                         ids=["Blend", "Additive", "Modulate", "Modulate2x", "AlphaKey-kept", "AlphaKey-discarded"])
def test_each_pre2_filter_mode_blends_over_the_background_as_its_table_says(tmp_path, mode, alpha):
    e = static_pre2(1, COLOR, alpha, mode)
    m = load(fx_model(tmp_path, f"mode{mode}", pre2s=[e]))
    frame = render(m)
    assert renderer().effects.last_stats["particles"] == 1
    centre = frame.rgba[32, 32].astype(int)
    np.testing.assert_allclose(centre[:3], expected(mode, alpha / 255), atol=2)
    assert centre[3] == 255


def test_invalid_filter_mode_draws_as_blend(tmp_path):
    e = static_pre2(1, COLOR, 128, 9)
    m = load(fx_model(tmp_path, "invalid", pre2s=[e]))
    np.testing.assert_allclose(render(m).rgba[32, 32, :3], expected(0, 128 / 255), atol=2)


def test_blended_smoke_darkens_a_bright_background_and_additive_flame_brightens_it(tmp_path):
    flame = static_pre2(1, (1.0, 0.6, 0.2), 204, 1, half=12.0)  # Additive
    smoke = static_pre2(2, (0.3, 0.3, 0.3), 204, 0, half=12.0)  # Blend
    m = load(fx_model(tmp_path, "brazier", pre2s=[flame, smoke], pivots={1: (0, 18, 0), 2: (0, -18, 0)}))
    frame = render(m, background="#c8c8c8")
    bg = 200
    flame_px = frame.rgba[32, 48, :3].astype(int)  # +Y is screen right for the front camera
    smoke_px = frame.rgba[32, 16, :3].astype(int)
    assert np.all(smoke_px < bg - 50), smoke_px  # grey smoke over a bright background is darker, not pale
    np.testing.assert_allclose(smoke_px, np.round(np.array([0.3] * 3) * 0.8 * 255 + bg * 0.2), atol=2)
    assert np.all(flame_px >= bg) and flame_px[0] == 255, flame_px
    assert renderer().effects.last_stats["draws"] == 2  # one instanced draw per emitter


def test_priority_plane_orders_emitters(tmp_path):
    red = static_pre2(1, (1.0, 0.0, 0.0), 230, 0, priority_plane=1)
    blue = static_pre2(2, (0.0, 0.0, 1.0), 230, 0, priority_plane=0)
    m = load(fx_model(tmp_path, "planes", pre2s=[red, blue]))
    px = render(m).rgba[32, 32, :3].astype(int)
    assert px[0] > 200 and px[2] < 40  # blue (plane 0) first, red (plane 1) blended over it


def test_particles_are_drawn_with_few_instanced_draws(samples):
    m = load(samples / "effects.mdx")
    render(m, t=2500, camera="auto")
    stats = renderer().effects.last_stats
    assert stats["particles"] > 40 and stats["ribbon_edges"] > 5
    assert stats["draws"] == 3  # flame, smoke, ribbon: one draw each, whatever the particle count


def test_team_colour_replaceable_id(tmp_path):
    from renderer.formats.textures.team import TEAM_COLORS

    e = static_pre2(1, (1.0, 1.0, 1.0), 255, 0, replaceable_id=1)
    m = load(fx_model(tmp_path, "team", pre2s=[e]))
    for team in (0, 3):
        px = render(m, team=team).rgba[32, 32, :3]
        np.testing.assert_allclose(px, TEAM_COLORS[team], atol=2)


def test_atlas_cells_pick_the_texture_quarter(tmp_path):
    atlas = np.zeros((8, 8, 4), np.uint8)
    atlas[..., 3] = 255
    atlas[:4, :4, 0] = 255  # cell 0: red (top left)
    atlas[:4, 4:, 1] = 255  # cell 1: green
    atlas[4:, :4, 2] = 255  # cell 2: blue
    atlas[4:, 4:] = 255  # cell 3: white
    e = static_pre2(1, (1.0, 1.0, 1.0), 255, 0, rows=2, columns=2, head_intervals=((2, 2, 1), (2, 2, 1)))
    m = load(fx_model(tmp_path, "atlas", pre2s=[e], textures={"atlas.tga": atlas}))
    np.testing.assert_array_equal(render(m).rgba[32, 32, :3], [0, 0, 255])


# ------------------------------------------------------------------------------------ determinism


def test_a_batch_gives_exactly_the_bytes_of_separate_renders(samples):
    model = load(samples / "effects.mdx")
    times = [0, 250, 700, 1234, 1500, 2999]
    r = renderer()
    r.reset_effects()
    restarts = r.effects.restarts
    batch = [render(model, t, size=48, camera="auto").rgba for t in times]
    assert r.effects.restarts == restarts + 1  # one simulation carried through the batch
    for t, got in zip(times, batch, strict=True):
        r.reset_effects()
        np.testing.assert_array_equal(render(model, t, size=48, camera="auto").rgba, got, err_msg=f"t={t}")
    fresh = Renderer()
    try:
        for t in (700, 1500):
            np.testing.assert_array_equal(render(model, t, size=48, camera="auto", r=fresh).rgba,
                                          batch[times.index(t)])
    finally:
        fresh.close()
    assert not np.array_equal(batch[2], batch[4])  # the effects really move


def test_a_redraw_at_the_same_time_changes_nothing(samples):
    model = load(samples / "effects.mdx")
    r = renderer()
    first = render(model, 1000, size=48, camera="auto").rgba
    advances = [rb.trail.advances for rb in next(reversed(r.effects._sims.values())).ribbons]
    again = render(model, 1000, size=48, camera="auto").rgba
    np.testing.assert_array_equal(first, again)
    assert [rb.trail.advances for rb in next(reversed(r.effects._sims.values())).ribbons] == advances


def test_instance_seed_is_in_the_trace_and_changes_the_particles(samples):
    model = load(samples / "effects.mdx")
    a = render(model, 1500, size=48, camera="auto")
    b = render(model, 1500, size=48, camera="auto", instance_seed=5)
    assert a.trace["instance_seed"] == 0 and b.trace["instance_seed"] == 5
    assert a.trace["fx_rule"] == FX_RULE
    assert not np.array_equal(a.rgba, b.rgba)


SCRIPT = """
import hashlib, sys
from renderer.formats import load_model
from renderer.frame import FrameSpec, Renderer
r = Renderer()
m = load_model(sys.argv[1])
f = r.render(m, FrameSpec(time_ms=1234, width=48, height=48, instance_seed=3))
print(hashlib.sha256(f.rgba.tobytes()).hexdigest())
"""


def test_an_effect_frame_is_identical_across_processes(samples):
    env = {"EGL_PLATFORM": "surfaceless", "PYOPENGL_PLATFORM": "egl", "PATH": "/usr/bin:/bin"}
    digests = set()
    for _ in range(2):
        out = subprocess.run([sys.executable, "-c", SCRIPT, str(samples / "effects.mdx")], cwd=ROOT, env=env,
                             capture_output=True, text=True, timeout=120)
        assert out.returncode == 0, out.stderr
        digests.add(out.stdout.strip())
    model = load(samples / "effects.mdx")
    renderer().reset_effects()
    here = renderer().render(model, FrameSpec(time_ms=1234, width=48, height=48, instance_seed=3))
    assert renderer().effects.last_stats["particles"] > 10
    assert digests == {hashlib.sha256(here.rgba.tobytes()).hexdigest()}


# ------------------------------------------------------------------------------------------ ribbons


def test_a_ribbon_draws_its_strip_with_its_materials_first_layer(tmp_path):
    r = ribbon(2, 1, emission_rate=50, lifespan=0.5, height_above=6.0, height_below=6.0, color=(1.0, 1.0, 0.0))
    r.tracks["KRAL"] = track("KRAL", [0], [1.0], interpolation=0)
    r.node_tracks["KGRT"] = track("KGRT", [0], [[0, 0, -0.7071068, 0.7071068]])  # local Y -> radial (+X)
    mat = Material(layers=[Layer(filter_mode=3, texture_id=0, shading_flags=0x11)])  # Additive
    m = load(fx_model(tmp_path, "ring", ribbons=[r], helpers=[orbit(1)], pivots={2: (20, 0, 0)},
                      materials=[mat], textures={"tex.tga": white(rgba=(128, 255, 255, 255))},
                      sequences=[Sequence(name="Stand", interval=(0, 1000))]))
    top = "0,0,100:0,0,0:0,1,0:40"  # looking down at the circle
    frame = render(m, 400, camera=top, background="#000000")
    assert renderer().effects.last_stats["ribbon_edges"] == 20  # 50 edges/s, born at 20 .. 400 ms
    lit = frame.rgba[..., :3].max(axis=2) > 0
    assert lit.sum() > 100
    # Texture (128, 255, 255) x edge colour KRCO (1, 1, 0), added to black.
    np.testing.assert_allclose(np.median(frame.rgba[lit][:, :3], axis=0), [128, 255, 0], atol=2)
    # A band between radius 14 and 26 around the centre, over the 144 degrees swept since 20 ms.
    y, x = np.nonzero(lit)
    radius = np.hypot(x + 0.5 - 32, y + 0.5 - 32) * (100 * np.tan(np.radians(20)) / 32)
    assert radius.min() > 12 and radius.max() < 28
    assert not lit[28:36, 28:36].any()


def test_a_150_per_second_ribbon_keeps_its_rate_in_a_frame(tmp_path):
    r = ribbon(2, 1, emission_rate=150, lifespan=0.45, height_above=6.0, height_below=6.0, color=(1.0, 1.0, 0.0))
    r.tracks["KRAL"] = track("KRAL", [0], [1.0], interpolation=0)
    r.node_tracks["KGRT"] = track("KGRT", [0], [[0, 0, -0.7071068, 0.7071068]])
    mat = Material(layers=[Layer(filter_mode=3, texture_id=0, shading_flags=0x11)])
    m = load(fx_model(tmp_path, "fast", ribbons=[r], helpers=[orbit(1)], pivots={2: (20, 0, 0)},
                      materials=[mat], textures={"tex.tga": white(rgba=(128, 255, 255, 255))},
                      sequences=[Sequence(name="Stand", interval=(0, 1000))]))
    frame = render(m, 900, camera="0,0,100:0,0,0:0,1,0:40", background="#000000")
    assert 66 <= renderer().effects.last_stats["ribbon_edges"] <= 69  # 150 x 0.45; a 2-per-step cap: 46
    lit = frame.rgba[..., :3].max(axis=2) > 0
    assert lit.sum() > 100
    np.testing.assert_allclose(np.median(frame.rgba[lit][:, :3], axis=0), [128, 255, 0], atol=2)


# --------------------------------------------------------------------------------------------- PREM


def child_model(tmp_path):
    geo = quad(half=10.0)
    mat = Material(layers=[Layer(filter_mode=0, texture_id=0, shading_flags=0x1)])
    return fx_model(tmp_path, "Spark", geosets=[geo], materials=[mat], textures={"spark.tga": white(rgba=(0, 255, 0,
                                                                                                         255))})


def test_prem_spawns_child_model_instances(tmp_path):
    child_model(tmp_path)
    e = prem(1, emission_rate=1.0, lifespan=10.0, speed=0.0, path="Spark.mdl")  # .mdl falls back to .mdx
    m = load(fx_model(tmp_path, "spawner", prems=[e], textures={"white.tga": white()}))
    frame = render(m, 1500, background="#000000")
    assert renderer().effects.last_stats["children"] == 1
    np.testing.assert_array_equal(frame.rgba[32, 32, :3], [0, 255, 0])
    assert not any("Spark" in d.message for d in frame.diagnostics)
    empty = render(m, 900, background="#000000")  # nothing spawned yet
    assert empty.rgba[..., :3].max() == 0


def test_a_missing_prem_child_is_reported_and_not_drawn(tmp_path):
    e = prem(1, emission_rate=1.0, lifespan=10.0, path="Abilities\\Nowhere.mdl")
    m = load(fx_model(tmp_path, "lost", prems=[e]))
    frame = render(m, 1500, background="#000000")
    assert frame.rgba[..., :3].max() == 0
    assert any("Nowhere.mdl" in d.message and "not drawn" in d.message for d in frame.diagnostics)


def test_prem_textured_particles(tmp_path):
    e = prem(1, flags=0x1000 | 0x10000, emission_rate=1.0, lifespan=10.0, path="dot.tga")
    m = load(fx_model(tmp_path, "dots", prems=[e], textures={"dot.tga": white(rgba=(0, 0, 255, 255))}))
    frame = render(m, 1500, background="#000000")
    np.testing.assert_array_equal(frame.rgba[32, 32, :3], [0, 0, 255])
    assert renderer().effects.last_stats["particles"] == 1


def emitting_child(tmp_path):
    """Spark.mdx: no geometry, one PRE2 emitting a huge still red particle every second of its own time."""
    e = static_pre2(1, (255, 0, 0), 255, filter_mode=0)  # red
    return fx_model(tmp_path, "Spark", pre2s=[e], textures={"white.tga": white()})


def test_a_prem_child_runs_its_own_emitters_at_its_age(tmp_path):
    emitting_child(tmp_path)
    e = prem(1, emission_rate=1.0, lifespan=10.0, speed=0.0, path="Spark.mdx")
    m = load(fx_model(tmp_path, "spawner", prems=[e], textures={"white.tga": white()}))
    # The child is born at 1000 ms; its own PRE2 spawns its first particle at its age 1000 ms.
    young = render(m, 1500, background="#000000")  # child age 500: nothing of its own yet
    assert renderer().effects.last_stats["children"] == 1 and young.rgba[..., :3].max() == 0
    old = render(m, 2500, background="#000000")  # child age 1500: one red particle of its own
    np.testing.assert_array_equal(old.rgba[32, 32, :3], [255, 0, 0])
    # Batches equal separate renders, in any order (the child's effects depend on its age and seed only).
    r = Renderer()
    try:
        batch = [r.render(m, FrameSpec(sequence=0, time_ms=t, width=64, height=64, camera=FRONT_CAMERA,
                                       background="#000000")).rgba for t in (2500, 1500, 3100, 2500)]
    finally:
        r.close()
    alone = [render(m, t, background="#000000").rgba for t in (2500, 1500, 3100)]
    for got, want in zip(batch, [alone[0], alone[1], alone[2], alone[0]], strict=True):
        np.testing.assert_array_equal(got, want)


def test_prem_children_of_different_particles_are_seeded_apart():
    from renderer.fx.draw import child_seed

    seeds = {child_seed(0, 1, ident) for ident in range(1000)}
    assert len(seeds) == 1000 and child_seed(0, 1, 5) != child_seed(1, 1, 5) != child_seed(0, 2, 5)
    assert child_seed(3, 4, 5) == child_seed(3, 4, 5)
