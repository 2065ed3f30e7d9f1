"""Inputs that travel (renderer.inputs, renderer.assets.pins): a model's lookups answered where its
files are, then given again where they are not. A frame drawn from the pinned answers, with the
files gone, has the pixels, the asset record and the diagnostics of the frame drawn from the files:
textures in the model's folder and above it, asset roots, an archive entry and the archive's own
textures, PREM child models, EVTS tables and what they name, team colours from game data (which stays
where it is), Halo shader and bitmap tags. And `texture_lookups` makes exactly the lookups
`load_textures` makes."""

from __future__ import annotations

import dataclasses
import hashlib
import os
import shutil
from pathlib import Path

import numpy as np
import pytest
from fx_util import fx_model, load, prem, static_pre2, white
from render_util import FRONT_CAMERA, quad
from test_fx_events import tables, with_event

os.environ.setdefault("EGL_PLATFORM", "surfaceless")
os.environ.setdefault("PYOPENGL_PLATFORM", "egl")

from conftest import CORPUS  # noqa: E402

from renderer import formats  # noqa: E402
from renderer.assets.pins import InputError, Pins  # noqa: E402
from renderer.assets.search import AssetSearch, ModelLocation  # noqa: E402
from renderer.assets.sources import read_source  # noqa: E402
from renderer.context import Loaded  # noqa: E402
from renderer.formats import load_model, source_label  # noqa: E402
from renderer.frame import FrameSpec, Renderer, texture_settings  # noqa: E402
from renderer.inputs import model_inputs  # noqa: E402
from renderer.model import Layer, Material, Texture  # noqa: E402
from renderer.samples import write_samples  # noqa: E402
from renderer.texture_set import TextureSettings, load_textures, texture_lookups  # noqa: E402

TIMES = (0, 700, 1500, 2600)


def _pin(source: str, spec: FrameSpec):
    """(the model's bytes, the pinned document, the bytes by sha256) as a coordinator makes them."""
    data = read_source(source)
    model, context = formats.read(data, source_label(source))
    found = model_inputs(model, texture_settings(spec), spec.events, context)
    blobs = {**found.blobs, hashlib.sha256(data).hexdigest(): data}
    return data, Pins(found.answers, blobs.__getitem__).to_dict(), blobs


def _frames(loaded: Loaded, specs) -> list:
    r = Renderer()
    try:
        return [r.render(loaded.model, s, context=loaded.context) for s in specs]
    finally:
        r.close()


def _same_frames(source: str, hide: Path, specs: list[FrameSpec], game=()) -> list:
    """Frames of `source` from its files, then from pinned inputs with `hide` moved away; both equal."""
    here = _frames(formats.load(source), specs)
    data, doc, blobs = _pin(source, specs[0])
    fetched: list[str] = []

    def fetch(sha: str) -> bytes:
        fetched.append(sha)
        return blobs[sha]

    gone = hide.with_name(hide.name + "-elsewhere")
    hide.rename(gone)
    try:
        pins = Pins.from_dict(doc, fetch, game=game)
        name = source_label(source)
        there = _frames(_pinned(formats.read(data, name, resolver=pins.tags(name)), pins), specs)
    finally:
        gone.rename(hide)
    for a, b in zip(here, there, strict=True):
        np.testing.assert_array_equal(a.rgba, b.rgba)
        assert a.assets == b.assets
        assert [(d.where, d.message) for d in a.diagnostics] == [(d.where, d.message) for d in b.diagnostics]
        assert a.trace == b.trace
    return here


def _pinned(loaded: Loaded, pins: Pins) -> Loaded:
    """A model read from travelling inputs, its lookups answered by `pins` (farm.run.inputs' way)."""
    return Loaded(loaded.model, dataclasses.replace(loaded.context, pins=pins))


def _specs(**kw) -> list[FrameSpec]:
    return [FrameSpec(sequence=0, time_ms=t, width=48, height=48, background="#000000", **kw) for t in TIMES]


def test_the_sample_models_from_pinned_inputs(tmp_path):
    site = tmp_path / "site"
    for path in write_samples(site / "models"):
        frames = _same_frames(str(path), site, _specs())
        assert any(a.get("found") for f in frames for a in f.assets) or path.stem == "effects"


def test_textures_above_the_model_and_in_asset_roots_missing_ones_too(tmp_path):
    site = tmp_path / "site"
    units = site / "map.w3x" / "units"
    units.mkdir(parents=True)
    (site / "extra").mkdir()
    path = fx_model(units, "u", geosets=[quad(half=10.0, y=-12), quad(half=10.0, y=12, material=1),
                                        quad(half=5.0, z=20, material=2)],
                    materials=[Material(layers=[Layer(texture_id=i, shading_flags=1)]) for i in range(3)],
                    textures={"up.tga": white(rgba=(200, 10, 10, 255)), "root.tga": white(rgba=(10, 200, 10, 255)),
                              "nowhere.tga": white()})
    (units / "up.tga").rename(site / "map.w3x" / "up.tga")  # above the model, inside its map
    (units / "root.tga").rename(site / "extra" / "root.tga")  # in an asset root
    (units / "nowhere.tga").unlink()  # missing: pinned as missing, with where the search looked
    frames = _same_frames(str(path), site, _specs(camera=FRONT_CAMERA, assets=(str(site / "extra"),)))
    record = {a["asked"]: a for a in frames[0].assets}
    assert record["up.tga"]["found"] and record["root.tga"]["found"] and record["nowhere.tga"]["missing"]


def test_prem_children_events_and_their_tables(tmp_path):
    site = tmp_path / "site"
    site.mkdir()
    tables(site)
    green = Material(layers=[Layer(texture_id=0, shading_flags=0x1)])
    fx_model(site, "Spark", geosets=[quad(half=10.0)], materials=[green], pre2s=[static_pre2(1, (255, 0, 0), 255, 0)],
             textures={"green.tga": white(rgba=(0, 255, 0, 255))})
    emitter = prem(1, emission_rate=1.0, lifespan=10.0, speed=0.0, path="Spark.mdl")  # found as Spark.mdx
    spawner = fx_model(site, "spawner", prems=[emitter], textures={"white.tga": white()})
    frames = _same_frames(str(spawner), site, _specs(camera=FRONT_CAMERA))
    assert any(a.get("asked") == "Spark.mdx" and a.get("found") for a in frames[-1].assets)
    assert frames[-1].rgba[..., 1].max() == 255  # the child is drawn
    with_event(site, "SPLxTEST")
    with_event(site, "SPNxTEST", frames=(200,))
    frames = _same_frames(str(site / "evt.mdx"), site, _specs(camera="0,0,300:0,0,0:0,1,0", events="model"))
    assert any(a.get("kind") == "event table" and a.get("found") for a in frames[-1].assets)


def test_game_data_stays_where_it_is(tmp_path):
    """Team colour found in game data: the worker searches its own game data for it (here the same
    folder, visible to both), and without game data there it draws the built-in colour, as a
    search over the files without game data does."""
    game = tmp_path / "game" / "ReplaceableTextures" / "TeamColor"
    game.mkdir(parents=True)
    from PIL import Image

    Image.fromarray(np.full((4, 4, 4), (1, 2, 250, 255), np.uint8)).save(game / "TeamColor03.tga")
    site = tmp_path / "site"
    site.mkdir()
    path = fx_model(site, "team", geosets=[quad(half=10.0)],
                    materials=[Material(layers=[Layer(texture_id=0, shading_flags=1)])], textures={"t.tga": white()})
    m = load(path)
    m.textures = [Texture(replaceable_id=1)]
    from renderer.formats.mdx import save_mdx

    save_mdx(m, path)
    specs = _specs(camera=FRONT_CAMERA, team=3, game=(str(tmp_path / "game"),))
    frames = _same_frames(str(path), site, specs, game=(str(tmp_path / "game"),))
    assert tuple(frames[0].rgba[24, 24, :3]) == (1, 2, 250)
    data, doc, blobs = _pin(str(path), specs[0])
    assert not any(b == (game / "TeamColor03.tga").read_bytes() for b in blobs.values())  # never uploaded
    pins = Pins.from_dict(doc, blobs.__getitem__, game=())  # a worker without game data
    (frame,) = _frames(_pinned(formats.read(data, str(path)), pins), specs[:1])
    no_game = FrameSpec(sequence=0, time_ms=0, width=48, height=48, background="#000000", camera=FRONT_CAMERA, team=3)
    (builtin,) = _frames(formats.load(str(path)), [no_game])
    np.testing.assert_array_equal(frame.rgba, builtin.rgba)


def test_a_model_inside_an_archive_with_its_textures(tmp_path):
    from mpq_build import build, have_tools

    why = have_tools()
    if why:
        pytest.skip(why)
    folder = tmp_path / "src"
    write_samples(folder)
    site = tmp_path / "site"
    site.mkdir()
    archive = build(folder, site / "pack.w3x")
    frames = _same_frames(f"{archive}:crate.mdx", site, _specs())
    assert any(str(a.get("found", "")).startswith(f"{archive}:") for a in frames[0].assets)


def test_halo_tags_from_pinned_inputs(tmp_path):
    tree = next(CORPUS.rglob("tree_leafy.gbxmodel"), None) if CORPUS.is_dir() else None
    if tree is None:
        pytest.skip(f"no Halo tree_leafy.gbxmodel under {CORPUS} (../shared/corpus is not beside this checkout)")
    site = tmp_path / "site"
    dst = site / "tags" / "scenery" / "trees" / "tree_leafy"
    shutil.copytree(tree.parent, dst)
    (dst / "bitmaps" / "tree_leafy_trunk.bitmap").unlink()  # a missing tag is pinned as missing
    spec = FrameSpec(sequence=None, time_ms=0, width=48, height=48, background="#000000")
    frames = _same_frames(str(dst / "tree_leafy.gbxmodel"), site, [spec])
    kinds = {(a["kind"], bool(a.get("found"))) for a in frames[0].assets}
    assert ("halo bitmap", True) in kinds and ("halo bitmap", False) in kinds and ("halo shader", True) in kinds


def test_a_fetch_that_fails_is_an_input_error(tmp_path):
    path = write_samples(tmp_path / "m")[0]
    data, doc, blobs = _pin(str(path), _specs()[0])

    def broken(sha: str) -> bytes:
        raise OSError("the store is unreachable")

    pins = Pins.from_dict(doc, broken)
    search = pins.search(formats.read(data, str(path)).context.location, texture_settings(_specs()[0]))
    asked = next(k[1] for table in pins.answers.values() for k, v in table.items() if "found" in v)
    with pytest.raises(InputError, match="cannot be fetched: the store is unreachable"):
        search.find(asked)


@pytest.mark.parametrize("name", ["crate", "filter_modes", "effects"])
def test_texture_lookups_are_load_textures_lookups(tmp_path, name):
    paths = {p.stem: p for p in write_samples(tmp_path)}
    model = load_model(paths[name])
    for settings in (TextureSettings(), TextureSettings(team=5, game=(str(tmp_path),))):
        a = AssetSearch.for_model(ModelLocation.from_path(model.path), settings.assets, settings.game,
                                  settings.stop_at)
        b = AssetSearch.for_model(ModelLocation.from_path(model.path), settings.assets, settings.game,
                                  settings.stop_at)
        load_textures(model, settings, a)
        texture_lookups(model, settings, b)
        assert a.record == b.record and a.record


def test_texture_lookups_on_corpus_models():
    models = sorted(CORPUS.rglob("*.mdx"))[:40] if CORPUS.is_dir() else []
    if not models:
        pytest.skip(f"no corpus at {CORPUS}")
    seen = 0
    for p in models:
        try:
            model = load_model(p)
        except Exception:  # noqa: BLE001 - the corpus holds broken files on purpose
            continue
        settings = TextureSettings(team=2)
        a = AssetSearch.for_model(ModelLocation.from_path(model.path), (), (), None)
        b = AssetSearch.for_model(ModelLocation.from_path(model.path), (), (), None)
        load_textures(model, settings, a)
        texture_lookups(model, settings, b)
        assert a.record == b.record, p
        seen += 1
    assert seen >= 10


def test_farm_run_inputs_travel_through_a_folder_store_too(tmp_path, monkeypatch):
    """--inputs travel with a folder store: every batch carries its inputs, the store holds them by
    sha256, and the frames are byte for byte those of the same job with its inputs at their paths."""
    from farm.cli import main
    from farm.run.jobs import JobState

    monkeypatch.delenv("FARM_BROKER_URL", raising=False)
    monkeypatch.setenv("FARM_INPUT_CACHE", str(tmp_path / "cache"))
    write_samples(tmp_path / "models")
    (tmp_path / "job.toml").write_text('size = "32x32"\ntimestamps = [0, 900]\n[[models]]\npaths = ["models/*.mdx"]\n')
    for mode in ("shared", "travel"):
        assert main(["run", str(tmp_path / "job.toml"), "--out", str(tmp_path / mode), "--job-id", "j",
                     "--workers", "1", "--no-compare", "--no-progress", "--inputs", mode]) == 0
    shared, travel = JobState.load("j", tmp_path / "shared"), JobState.load("j", tmp_path / "travel")
    assert travel.index() == shared.index() and travel.index(), _differences(shared, travel)
    assert all(b.get("inputs") for b in travel.batches.values())
    assert not any(b.get("inputs") for b in shared.batches.values())
    held = {p.name for p in (tmp_path / "travel" / "inputs").glob("??/*")}
    assert {b["inputs"] for b in travel.batches.values()} <= held
    assert not (tmp_path / "shared" / "inputs").exists()


def _differences(a, b) -> str:
    """Where two jobs' frames of the same keys differ: each frame's pixels (how many differ) and its trace's
    fields (this test failed once in a loaded full suite, 1 run in about 25: the next failure says why)."""
    from renderer.png import read_png

    lines = []
    ia, ib = a.index(), b.index()
    for key in sorted(k for k in ia.keys() | ib.keys() if ia.get(k) != ib.get(k)):
        try:
            (pa, ta), (pb, tb) = (read_png(j.store.read_image(i[key])) for j, i in ((a, ia), (b, ib)))
        except (KeyError, OSError) as e:
            lines.append(f"{key}: {e!r}")
            continue
        pixels = int((pa != pb).any(axis=-1).sum()) if pa.shape == pb.shape else f"{pa.shape} vs {pb.shape}"
        fields = {f: (ta.get(f), tb.get(f)) for f in sorted((ta or {}).keys() | (tb or {}).keys())
                  if (ta or {}).get(f) != (tb or {}).get(f)}
        lines.append(f"{key}: {pixels} pixels differ; trace fields that differ: {fields}")
    return "\n".join(lines)
