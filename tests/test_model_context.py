"""Issue 35 item 5: the neutral Model holds the file's data only; where a model came from and how its
inputs are found is its context (renderer.context.ModelContext), returned beside it by the loader
(`renderer.formats.load` / `read` -> Loaded) and passed beside it to the renderer. A model handed over
without one gets the context its path names, except a Halo model, whose bitmaps were found while it
loaded: refused, not drawn in flat colours. A model read from a job's travelling inputs renders the
bytes of the model read from its file. And the effects pass and the inputs walk name the same
lookups (one list, `renderer.fx.draw.effect_inputs`)."""

from __future__ import annotations

import dataclasses
import os
import shutil

import numpy as np
import pytest
from fx_util import fx_model, prem, static_pre2, white
from render_util import FRONT_CAMERA, quad
from test_halo_tagbuild import model_tag, uncompressed

os.environ.setdefault("EGL_PLATFORM", "surfaceless")
os.environ.setdefault("PYOPENGL_PLATFORM", "egl")

from renderer.context import Loaded, ModelContext  # noqa: E402
from renderer.formats import context_of, load, load_model, read  # noqa: E402
from renderer.formats.halo import HaloBitmaps  # noqa: E402
from renderer.frame import FrameSpec, Renderer  # noqa: E402
from renderer.fx.draw import effect_inputs  # noqa: E402
from renderer.fx.prem import USES_MDL  # noqa: E402
from renderer.model import Layer, Material, Model, ParticleEmitter, ParticleEmitter2, Texture  # noqa: E402
from renderer.samples import write_samples  # noqa: E402


def test_the_model_holds_no_run_time_state(tmp_path):
    names = {f.name for f in dataclasses.fields(Model)}
    assert not names & {"location", "texture_source", "pins"}
    path = write_samples(tmp_path)[0]
    model, context = load(path)
    assert not hasattr(model, "location") and not hasattr(model, "pins")
    assert context.location.folder == tmp_path and len(context.location.digest) == 64
    assert context_of(model) == ModelContext.from_path(str(path))  # what a plain caller's model gets
    with pytest.raises(dataclasses.FrozenInstanceError):
        context.pins = object()


def _halo(tmp_path):
    u = uncompressed([(0, 0, 0), (1, 0, 0), (0, 1, 0)])
    path = tmp_path / "tags" / "m" / "m.gbxmodel"
    path.parent.mkdir(parents=True)
    path.write_bytes(model_tag(shaders=[(b"soso", "s\\gone")], geometries=[[{"shader": 0, "uncompressed": u,
                                                                            "strip": [0, 1, 2]}]]))
    return path


def test_a_halo_model_comes_with_its_bitmaps_and_is_refused_without_them(tmp_path):
    path = _halo(tmp_path)
    model, context = load(path)
    assert isinstance(context.texture_source, HaloBitmaps) and context.texture_source.resolver is not None
    bare = load_model(path)
    with pytest.raises(ValueError, match="pass the context renderer.formats.load"):
        context_of(bare)
    r = Renderer()
    try:  # refused before any GL work: the context is settled first
        with pytest.raises(ValueError, match="textures are found when it loads"):
            r.render(bare, FrameSpec(width=8, height=8))
    finally:
        r.close()


def test_a_child_model_has_its_own_location_and_its_parent_s_pins(tmp_path):
    parent = ModelContext.from_path(str(tmp_path / "a" / "p.mdx"))
    pins = object()
    parent = dataclasses.replace(parent, pins=pins)
    path = write_samples(tmp_path / "b")[0]
    child = parent.child(read(path.read_bytes(), str(path)))
    assert isinstance(child, Loaded) and child.context.pins is pins
    assert child.context.location.folder == tmp_path / "b" and child.context.location.digest


def test_the_effects_pass_and_the_inputs_walk_share_one_list():
    model = Model(particle_emitters2=[ParticleEmitter2(replaceable_id=0), ParticleEmitter2(replaceable_id=1)],
                  particle_emitters=[ParticleEmitter(path="Spark.mdl", flags=USES_MDL),
                                     ParticleEmitter(path="Dust.blp")])
    items = effect_inputs(model)
    assert [i.texture for i in items if i.texture] == [Texture(replaceable_id=1), Texture(path="Dust.blp")]
    assert [i.child for i in items if i.child] == ["Spark.mdl"]


def test_a_model_from_travelling_inputs_renders_the_bytes_of_its_file(tmp_path, monkeypatch):
    """Planned, published from planning's read (farm.run.inputs.Publisher), then read on a 'worker' from
    the store with the files moved away: the same pixels, trace and asset record as from the file."""
    from farm.plan.batches import expand_manifest
    from farm.plan.manifest import load_manifest
    from farm.run.inputs import Publisher, read_batch_model
    from farm.store import FolderStore

    monkeypatch.setenv("FARM_INPUT_CACHE", str(tmp_path / "cache"))
    site = tmp_path / "site"
    units = site / "Keep.w3x" / "units"
    units.mkdir(parents=True)
    fx_model(units, "Spark", geosets=[quad(half=8.0)], pre2s=[static_pre2(1, (255, 0, 0), 255, 0)],
             textures={"spark.tga": white(rgba=(0, 250, 0, 255))})
    fx_model(units, "tower", geosets=[quad(half=12.0)], textures={"stone.tga": white(rgba=(200, 20, 20, 255))},
             materials=[Material(layers=[Layer(texture_id=0, shading_flags=1)])],
             prems=[prem(1, emission_rate=2.0, lifespan=5.0, speed=0.0, path="Spark.mdx")])
    shutil.move(units / "stone.tga", site / "Keep.w3x" / "stone.tga")  # found above the model
    (site / "job.toml").write_text('size = "32x32"\ntimestamps = [0, 900]\nbackground = "#000000"\n'
                                   f'camera = "{FRONT_CAMERA}"\n[[models]]\npaths = ["Keep.w3x/units/tower.mdx"]\n')
    store = FolderStore(tmp_path / "store")
    publisher = Publisher(store)
    plan = expand_manifest(load_manifest(site / "job.toml"), publisher.read, publisher.planned)
    assert plan.batches and all(b.inputs for b in plan.batches)
    r = Renderer()
    try:
        here = [(b, t, _render(r, load(b.model), b, t)) for b in plan.batches for t in b.times]
        shutil.move(site, tmp_path / "elsewhere")
        for b, t, frame in here:
            loaded, digest = read_batch_model(b, store)
            assert digest == b.model_digest and loaded.context.pins is not None
            there = _render(r, loaded, b, t)
            np.testing.assert_array_equal(frame.rgba, there.rgba)
            assert frame.trace == there.trace and frame.assets == there.assets
            assert any(a.get("asked") == "stone.tga" and a.get("found") for a in there.assets)
    finally:
        r.close()


def _render(r: Renderer, loaded: Loaded, batch, t: int):
    seq = batch.sequence if isinstance(batch.sequence, int) else None
    return r.render(loaded.model, batch.frame_spec(seq, t), context=loaded.context)
