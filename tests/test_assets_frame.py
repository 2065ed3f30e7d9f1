"""What the farm calls: FrameSpec / Renderer asset settings (asset roots, game data, stop root) and
the record each Frame carries."""

from __future__ import annotations

import pytest
from mpq_build import build, have_tools
from render_util import FRONT_CAMERA, layer, quad, renderer, solid, write_model

from renderer.formats import load_model
from renderer.frame import FrameSpec, Renderer
from renderer.texture_set import TextureSettings

RED, BLUE = (255, 0, 0, 255), (0, 0, 255, 255)


@pytest.fixture
def gl():
    return renderer()


@pytest.fixture
def job(tmp_path):
    job = tmp_path / "job"
    unit = job / "units" / "u"
    unit.mkdir(parents=True)
    path = write_model(unit, "u", [layer(0)], {"Skin.tga": solid(RED)}, [quad()])
    (unit / "Skin.tga").rename(job / "Skin.tga")
    return job, path


def centre(frame):
    return frame.rgba[frame.rgba.shape[0] // 2, frame.rgba.shape[1] // 2]


def spec(**kw):
    return FrameSpec(width=32, height=32, camera=FRONT_CAMERA, background="#000000", **kw)


def test_stop_root_and_the_record(gl, job):
    root, path = job
    model = load_model(path)
    alone = gl.render(model, spec())
    assert [e["asked"] for e in alone.missing_assets] == ["Skin.tga"]
    assert alone.missing_assets[0]["looked"] == [str(path.parent)]
    assert sum("not found" in d.message for d in alone.diagnostics) == 1
    found = gl.render(model, spec(stop_at=str(root)))
    assert not found.missing_assets and found.assets[0]["found"] == str(root / "Skin.tga")
    r, _, b, _ = (int(c) for c in centre(found))
    assert r > 100 and b < 20
    gl.forget(model)
    # Renderer-wide defaults (no GL context is made to read them): the spec's own roots come first.
    defaults = Renderer(assets=("/a",), game="/game", stop_at=root)
    assert defaults.texture_settings(spec()) == TextureSettings(("/a",), 0, "checker", ("/game",), str(root))
    assert defaults.texture_settings(spec(assets=("/b",), game=("/g1", "/g2"), stop_at="/s", team=3)) == (
        TextureSettings(("/b", "/a"), 3, "checker", ("/g1", "/g2"), "/s"))


@pytest.mark.skipif(have_tools() is not None, reason=str(have_tools()))
def test_game_data_after_asset_roots(gl, job, tmp_path):
    root, path = job
    data = tmp_path / "data"
    data.mkdir()
    write_model(data, "unused", [layer(0)], {"Skin.tga": solid(BLUE)}, [quad()])
    (data / "unused.mdx").unlink()
    game = build(data, tmp_path / "game" / "war3.mpq")
    model = load_model(path)
    frame = gl.render(model, spec(game=(str(game),)))
    assert frame.assets[0]["found"] == f"{game}:Skin.tga"
    r, _, b, _ = (int(c) for c in centre(frame))
    assert b > 100 and r < 20
    both = gl.render(model, spec(assets=(str(root),), game=str(tmp_path / "game")))  # a game folder
    assert both.assets[0]["found"] == str(root / "Skin.tga")
    gl.forget(model)
