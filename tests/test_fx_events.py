"""EVTS event visuals (renderer.fx.events): event codes resolved through the game's SLK tables
(here hand-written in the model's folder), drawn at their KEVT frames: a splat on the ground, a
spawned model; nothing (and a diagnostic) without the table; nothing with events off."""

from __future__ import annotations

import os

import numpy as np
import pytest
from fx_util import fx_model, load, white
from render_util import FRONT_CAMERA, quad

os.environ.setdefault("EGL_PLATFORM", "surfaceless")
os.environ.setdefault("PYOPENGL_PLATFORM", "egl")

from PIL import Image  # noqa: E402

from renderer.formats.mdx import save_mdx  # noqa: E402
from renderer.frame import FrameSpec, Renderer  # noqa: E402
from renderer.fx.events import parse_slk, resolve_events, split_name  # noqa: E402
from renderer.model import EventObject, Layer, Material  # noqa: E402

TOP = "0,0,300:0,0,0:0,1,0"  # looking straight down at the ground plane


def slk(rows: list[list]) -> str:
    lines = ["ID;PWXL;N;E"]
    for y, row in enumerate(rows, 1):
        for x, value in enumerate(row, 1):
            v = f'"{value}"' if isinstance(value, str) else str(value)
            lines.append(f"C;X{x};Y{y};K{v}" if x == 1 else f"C;X{x};K{v}")
    return "\n".join(lines + ["E"]) + "\n"


def with_event(tmp_path, name: str, frames=(500,)):
    path = fx_model(tmp_path, "evt", textures={"white.tga": white()})
    m = load(path)
    m.event_objects = [EventObject(name=name, object_id=1, frames=np.array(frames, np.int32))]
    m.pivots = np.zeros((2, 3), "<f4")
    save_mdx(m, path)
    return load(path)


def tables(tmp_path):
    (tmp_path / "Splats").mkdir(exist_ok=True)
    (tmp_path / "Splats" / "SplatData.slk").write_text(slk([
        ["Name", "Dir", "file", "Scale", "Lifespan", "Decay", "BlendMode", "StartR", "StartG", "StartB", "StartA",
         "MiddleR", "MiddleG", "MiddleB", "MiddleA", "EndR", "EndG", "EndB", "EndA"],
        ["TEST", "Splats", "Mark", 40, 2, 1, 0, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 0]]))
    Image.fromarray(np.full((8, 8, 4), (255, 0, 0, 255), np.uint8), "RGBA").save(tmp_path / "Splats" / "Mark.tga")
    (tmp_path / "Splats" / "SpawnData.slk").write_text(slk([["Name", "Model"], ["TEST", "Spawned.mdx"]]))
    geo = quad(half=10.0)
    mat = Material(layers=[Layer(filter_mode=0, texture_id=0, shading_flags=0x1)])
    fx_model(tmp_path, "Spawned", geosets=[geo], materials=[mat], textures={"green.tga": white(rgba=(0, 255, 0, 255))})


def render(model, t, events="model", camera=TOP):
    r = Renderer()
    try:
        return r.render(model, FrameSpec(sequence=0, time_ms=t, width=64, height=64, camera=camera,
                                         background="#000000", events=events)), r
    finally:
        r.close()


def test_slk_and_names():
    rows = parse_slk(slk([["Name", "Model"], ["ABCD", "x\\y.mdl"], ["EFGH", 3]]))
    assert rows == [{"Name": "ABCD", "Model": "x\\y.mdl"}, {"Name": "EFGH", "Model": "3"}]
    assert split_name("SPNxABCD") == ("spawn", "ABCD") and split_name("FPTxTRL1") == ("splat", "TRL1")
    assert split_name("XYZ") == (None, "")


def test_a_splat_shows_on_the_ground_from_its_frame_and_fades(tmp_path):
    tables(tmp_path)
    m = with_event(tmp_path, "SPLxTEST", frames=(500,))
    before, _ = render(m, 400)
    assert before.rgba[..., :3].max() == 0  # not fired yet
    (frame, r) = render(m, 1000)
    np.testing.assert_array_equal(frame.rgba[32, 32, :3], [255, 0, 0])
    assert frame.trace["events"] == "model"
    fading, _ = render(m, 500 + 2500)  # half-way through Decay: alpha 0.5 over black
    assert 100 < int(fading.rgba[32, 32, 0]) < 160
    gone, _ = render(m, 500 + 3100)
    assert gone.rgba[..., :3].max() == 0
    off, _ = render(m, 1000, events="off")
    assert off.rgba[..., :3].max() == 0 and "events" not in off.trace


def test_a_spawned_model_plays_from_its_event(tmp_path):
    tables(tmp_path)
    m = with_event(tmp_path, "SPNxTEST", frames=(500,))
    frame, _ = render(m, 1000, camera=FRONT_CAMERA)  # the spawned quad stands upright, facing the camera
    np.testing.assert_array_equal(frame.rgba[32, 32, :3], [0, 255, 0])
    assert render(m, 400, camera=FRONT_CAMERA)[0].rgba[..., :3].max() == 0


def test_without_the_table_an_event_is_a_diagnostic_and_draws_nothing(tmp_path):
    m = with_event(tmp_path, "UBRxNONE", frames=(0,))
    frame, _ = render(m, 1000)
    assert frame.rgba[..., :3].max() == 0
    assert any("UberSplatData.slk" in d.message and "nothing drawn" in d.message for d in frame.diagnostics)


def test_inspect_lists_what_each_code_resolved_to(tmp_path):
    from renderer.assets.search import AssetSearch, ModelLocation

    tables(tmp_path)
    m = with_event(tmp_path, "SPLxTEST")
    m.event_objects.append(EventObject(name="SPNxTEST", object_id=1, frames=np.array([0], np.int32)))
    m.event_objects.append(EventObject(name="UBRxNONE", object_id=1, frames=np.array([0], np.int32)))
    out = resolve_events(m, AssetSearch.for_model(ModelLocation.from_path(m.path)))
    assert [(e["kind"], e["resolved"]) for e in out] == [("splat", "Splats\\Mark.blp"), ("spawn", "Spawned.mdx"),
                                                         ("ubersplat", None)]
    assert "no Splats\\UberSplatData.slk" in out[2]["why"]


@pytest.mark.parametrize("bad", ["sometimes", ""])
def test_events_setting_is_checked(bad):
    with pytest.raises(ValueError, match="events must be one of"):
        FrameSpec(events=bad)


def test_farm_inspect_and_render_with_events(tmp_path, capsys):
    from farm.cli import main

    tables(tmp_path)
    with_event(tmp_path, "SPLxTEST")
    model = str(tmp_path / "evt.mdx")
    assert main(["inspect", model]) == 0
    assert "SPLxTEST: splat TEST -> Splats\\Mark.blp" in capsys.readouterr().out
    out = tmp_path / "e.png"
    assert main(["render", model, "-o", str(out), "--size", "64x64", "--camera", TOP, "--time", "1000",
                 "--background", "#000000", "--events", "model"]) == 0
    from renderer.png import read_png

    rgba, trace = read_png(out)
    assert tuple(rgba[32, 32, :3]) == (255, 0, 0) and trace["events"] == "model"


@pytest.mark.corpus
def test_corpus_models_with_events_render_with_them():
    from conftest import corpus_files

    from renderer.formats import load_model

    seen = 0
    with Renderer() as r:
        for p in corpus_files("*.mdx"):
            try:
                m = load_model(p)
            except Exception:  # noqa: BLE001 - the loaders' own tests cover broken corpus files
                continue
            if not m.event_objects:
                continue
            seq = 0 if m.sequences else None
            frame = r.render(m, FrameSpec(sequence=seq, time_ms=1500, width=32, height=32, events="model"))
            plain = r.render(m, FrameSpec(sequence=seq, time_ms=1500, width=32, height=32))
            assert frame.trace["events"] == "model" and "events" not in plain.trace
            fired = [d for d in frame.diagnostics if d.where.startswith("EVTS")]
            assert all("nothing drawn" in d.message for d in fired)  # the corpus has no game data: named, not drawn
            seen += 1
            r.forget(m)
    if not seen:
        pytest.skip("no corpus model with event objects")
    assert seen >= 3


def test_a_spawned_model_runs_its_own_effects_from_the_event(tmp_path):
    from fx_util import static_pre2

    tables(tmp_path)
    (tmp_path / "Splats" / "SpawnData.slk").write_text(slk([["Name", "Model"], ["TEST", "Sparks.mdx"]]))
    fx_model(tmp_path, "Sparks", pre2s=[static_pre2(1, (255, 0, 0), 255, filter_mode=0)],
             textures={"white.tga": white()})  # no geometry: one red particle a second of its own time
    m = with_event(tmp_path, "SPNxTEST", frames=(500,))
    early, _ = render(m, 1200, camera=FRONT_CAMERA)  # spawned 700 ms ago: no particle of its own yet
    assert early.rgba[..., :3].max() == 0
    late, _ = render(m, 2000, camera=FRONT_CAMERA)  # 1500 ms: its first particle
    np.testing.assert_array_equal(late.rgba[32, 32, :3], [255, 0, 0])


def test_a_job_can_ask_for_events_and_lights(tmp_path):
    from farm.run.jobs import run_job

    tables(tmp_path)
    with_event(tmp_path, "SPLxTEST")
    manifest = tmp_path / "job.toml"
    manifest.write_text(f'size = "64x64"\ntimestamps = [1000]\ncamera = "{TOP}"\nbackground = "#000000"\n'
                        'events = "model"\nlights = "model"\nmodels = ["evt.mdx"]\n')
    job = run_job(manifest, out=tmp_path / "out", workers=1, broker="local", progress=False)
    (key,) = job.traces
    assert key.endswith("|lights=model|events=model") and job.traces[key]["status"] == "done"
    from renderer.png import read_png

    rgba, trace = read_png(job.store.read_image(job.traces[key]["digest"]))
    assert tuple(rgba[32, 32, :3]) == (255, 0, 0) and trace["events"] == "model" and "lights" in trace


def test_tables_and_splat_textures_come_from_game_data_too(tmp_path):
    game = tmp_path / "war3-extracted"
    game.mkdir()
    tables(game)  # the tables and the splat texture live in the game data, not next to the model
    models = tmp_path / "models"
    models.mkdir()
    m = with_event(models, "SPLxTEST")
    r = Renderer()
    try:
        frame = r.render(m, FrameSpec(sequence=0, time_ms=1000, width=64, height=64, camera=TOP,
                                      background="#000000", events="model", game=(str(game),)))
    finally:
        r.close()
    np.testing.assert_array_equal(frame.rgba[32, 32, :3], [255, 0, 0])
    found = {a["asked"]: a for a in frame.assets if a.get("found")}
    assert "Splats\\SplatData.slk" in found and any("Mark" in k for k in found), sorted(found)


def test_a_prem_child_in_game_data_is_found_and_recorded(tmp_path):
    from fx_util import prem

    from renderer.model import Layer as L
    from renderer.model import Material as M

    game = tmp_path / "game"
    game.mkdir()
    fx_model(game, "Spark", geosets=[quad(half=10.0)], materials=[M(layers=[L(filter_mode=0, texture_id=0,
                                                                              shading_flags=0x1)])],
             textures={"green.tga": white(rgba=(0, 255, 0, 255))})
    models = tmp_path / "models"
    models.mkdir()
    e = prem(1, emission_rate=1.0, lifespan=10.0, speed=0.0, path="Spark.mdx")
    m = load(fx_model(models, "spawner", prems=[e], textures={"white.tga": white()}))
    r = Renderer()
    try:
        frame = r.render(m, FrameSpec(sequence=0, time_ms=1500, width=64, height=64, camera=FRONT_CAMERA,
                                      background="#000000", game=(str(game),)))
    finally:
        r.close()
    np.testing.assert_array_equal(frame.rgba[32, 32, :3], [0, 255, 0])
    assert any(a.get("asked") == "Spark.mdx" and a.get("found") for a in frame.assets)
