"""The default look (farm.look): `farm render`, `farm view` and `farm thumbnails` show a model at the middle
of the chosen sequence through the fit camera unless told otherwise; an explicit --camera auto --time 0
draws exactly what farm render drew before; a blank frame is never silent (issue 24, item 3)."""

from __future__ import annotations

import json

import numpy as np
import pytest
from farm_cli import farm
from render_util import box_fraction, touches_border

from farm.look import blank_warning, default_time
from farm.settings import RenderSettings, containing_root
from farm.view.state import ViewState
from renderer.camera import FIT_RULE
from renderer.formats import load_model, save_model
from renderer.model import Extent
from renderer.png import png_bytes, read_png
from renderer.samples.build import crate, effects

SIZE = 96


def drawn(rgba) -> np.ndarray:
    return rgba[..., 3] > 0


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    """Model files: a particle-only effect whose MODL extent is far larger than what it draws, a crate
    whose extent is half its height (the clipped head of the issue), and the effects sample."""
    d = tmp_path_factory.mktemp("look")
    fx, _ = effects()
    fx.geosets, fx.ribbon_emitters, fx.helpers = [], [], []
    fx.pivots = fx.pivots[:3]
    fx.extent = Extent(2000.0, (-1000.0, -1000.0, 0.0), (1000.0, 1000.0, 2000.0))
    save_model(fx, d / "particles.mdx")
    box, _ = crate()
    box.extent = Extent(20.0, (-20.0, -20.0, 20.0), (20.0, 20.0, 60.0))
    save_model(box, d / "short.mdx")
    full, _ = effects()
    save_model(full, d / "effects.mdx")
    return d


def render(path, out, *args):
    r = farm("render", path, "-o", out, "--size", SIZE, *args)
    assert r.returncode == 0, r.stderr
    return (*read_png(out), r.stderr)


def test_a_particle_only_model_is_drawn_and_framed_with_the_defaults(models, tmp_path):
    model = load_model(models / "particles.mdx")
    rgba, trace, err = render(models / "particles.mdx", tmp_path / "default.png")
    assert trace["camera"]["source"] == "fit:drawn" and trace["time_ms"] == default_time(model, 0) == 1500
    mask = drawn(rgba)
    assert mask.any() and not touches_border(mask) and box_fraction(mask) > 0.4
    assert "blank" not in err
    # What farm render drew before (auto camera at 0 ms): nothing, and now it says so.
    old, old_trace, old_err = render(models / "particles.mdx", tmp_path / "old.png", "--camera", "auto", "--time", "0")
    assert not drawn(old).any() and old_trace["camera"]["source"].startswith("auto:")
    assert "is blank (fully transparent)" in old_err and "--time 1500" in old_err
    # The auto camera at the same time: the effect is there, but a few pixels in the middle of the frame.
    auto, _, _ = render(models / "particles.mdx", tmp_path / "auto.png", "--camera", "auto")
    assert box_fraction(mask) > 3 * box_fraction(drawn(auto))


def test_a_model_taller_than_its_extent_is_not_clipped_with_the_defaults(models, tmp_path):
    fit, trace, _ = render(models / "short.mdx", tmp_path / "fit.png")
    assert trace["camera"]["source"] == "fit:drawn" and trace["camera_rule"] == FIT_RULE
    assert not touches_border(drawn(fit)) and box_fraction(drawn(fit)) > 0.5
    auto, _, _ = render(models / "short.mdx", tmp_path / "auto.png", "--camera", "auto", "--time", "0")
    assert touches_border(drawn(auto))


@pytest.mark.parametrize("name", ["short", "effects"])
def test_camera_auto_and_time_0_give_the_bytes_farm_render_wrote_before(models, tmp_path, name):
    """Before the default look, farm render drew RenderSettings(camera="auto").frame_spec(first sequence, 0 ms)
    into a PNG with its trace: the same call, in this process, gives the same bytes."""
    from render_util import renderer

    path = models / f"{name}.mdx"
    _, _, _ = render(path, tmp_path / "cli.png", "--camera", "auto", "--time", "0")
    model = load_model(path)
    spec = RenderSettings(width=SIZE, height=SIZE).frame_spec(0, 0, containing_root(str(path), ()))
    renderer().reset_effects()
    frame = renderer().render(model, spec)
    assert (tmp_path / "cli.png").read_bytes() == png_bytes(frame.rgba, frame.trace)
    assert "camera_rule" not in frame.trace and frame.trace["camera"]["source"].startswith("auto:")


def test_several_times_keep_the_auto_camera_they_had(models, tmp_path):
    """--times/--every frames share one camera, as before (fit would frame each pose anew)."""
    for name, args in (("default", ()), ("auto", ("--camera", "auto"))):
        r = farm("render", models / "effects.mdx", "-o", tmp_path / f"{name}.png", "--size", 32, "--times", "0,1500",
                 *args)
        assert r.returncode == 0, r.stderr
    for t in ("0000_0ms", "0001_1500ms"):
        assert (tmp_path / f"default_{t}.png").read_bytes() == (tmp_path / f"auto_{t}.png").read_bytes()
    assert read_png(tmp_path / "default_0001_1500ms.png")[1]["camera"]["source"].startswith("auto:")


def test_render_thumbnails_and_view_agree_on_the_default_time_and_camera(models, tmp_path):
    from render_util import renderer

    path = models / "effects.mdx"
    model = load_model(path)
    _, trace, _ = render(path, tmp_path / "r.png")
    r = farm("thumbnails", path, "-o", tmp_path / "thumbs", "--size", SIZE, "--workers", "1", "--sheet", "0",
             "--no-progress")
    assert r.returncode == 0, r.stderr
    (entry,) = json.loads((tmp_path / "thumbs" / "index.json").read_text())["models"]
    _, thumb_trace = read_png(tmp_path / "thumbs" / entry["thumbnail"])
    state = ViewState.for_model(model, str(path), width=SIZE, height=SIZE)
    renderer().reset_effects()
    state.frame_default(renderer(), model)
    middle = default_time(model, 0)
    assert middle == 1500 and trace["time_ms"] == thumb_trace["time_ms"] == entry["time_ms"] == state.time_ms == middle
    assert trace["sequence"] == thumb_trace["sequence"] == state.sequences[state.sequence] == "Stand"
    assert trace["camera"]["source"] == thumb_trace["camera"]["source"] == "fit:drawn"
    for key in ("eye", "target"):
        assert trace["camera"][key] == thumb_trace["camera"][key]
    np.testing.assert_allclose(state.eye, trace["camera"]["eye"], rtol=0, atol=1e-6)
    np.testing.assert_allclose(state.target, trace["camera"]["target"], rtol=0, atol=1e-6)
    # The view's first frame is the fit frame (its camera rounded to CAMERA_DECIMALS), and `s`'s
    # command draws it again byte for byte, after the renderer drew the frame that found the camera.
    frame = renderer().render(model, state.frame_spec())
    fit_rgba, _ = read_png(tmp_path / "r.png")
    assert np.abs(frame.rgba.astype(int) - fit_rgba.astype(int)).max() <= 8
    argv = state.command(str(tmp_path / "again.png"))
    again = farm(*argv[1:])
    assert again.returncode == 0, again.stderr
    assert (tmp_path / "again.png").read_bytes() == png_bytes(frame.rgba, frame.trace)


def test_thumbnails_notice_the_camera_and_say_which_frames_are_blank(models, tmp_path):
    out = tmp_path / "thumbs"

    def run(*args):
        r = farm("thumbnails", models / "particles.mdx", "-o", out, "--size", 48, "--workers", "1", "--sheet", "0",
                 "--no-progress", *args)
        assert r.returncode == 0, r.stderr
        (entry,) = json.loads((out / "index.json").read_text())["models"]
        return r.stdout, entry

    text, entry = run("--camera", "auto", "--time", "0")
    assert entry["blank"] and "rendered" in text and f"warning: {entry['blank']}" in text.splitlines()
    assert "particles.mdx: the frame at 0 ms of sequence 0 'Stand' is blank (fully transparent)" in entry["blank"]
    assert "try --time 1500 (the middle of 'Stand') or another --sequence (Birth)" in entry["blank"]
    text, entry = run("--time", "0")  # the camera changed: rendered again (still blank at 0 ms)
    assert "1 rendered, 0 up to date" in text and entry["blank"]
    text, entry = run()  # the default look: the middle, fit, not blank
    assert "1 rendered, 0 up to date" in text and entry["blank"] is None and "is blank" not in text
    # the sample's missing textures: one counted line for the model (issue 33 item 6), not one per texture
    warned = [ln for ln in text.splitlines() if ln.startswith("warning")]
    assert len(warned) == 1 and warned[0].endswith("particles.mdx: 4 texture(s) not found (index.json; -v lists them)")
    assert entry["camera_source"] == "fit:drawn" and entry["time_ms"] == 1500
    text, _ = run()
    assert "0 rendered, 1 up to date" in text


def test_a_blank_frame_names_the_model_sequence_and_time_and_what_to_try(models, tmp_path):
    r = farm("render", models / "particles.mdx", "-o", tmp_path / "b.png", "--size", 32, "--camera", "auto",
             "--time", "0")
    assert r.returncode == 0, r.stderr
    (line,) = [ln for ln in r.stderr.splitlines() if "blank" in ln]
    assert line == (f"warning: {models / 'particles.mdx'}: the frame at 0 ms of sequence 0 'Stand' is blank (fully"
                    " transparent): nothing is drawn then; try --time 1500 (the middle of 'Stand') or another"
                    " --sequence (Birth)")
    # Several blank frames: one sentence for the first, and how many.
    r = farm("render", models / "particles.mdx", "-o", tmp_path / "m.png", "--size", 32, "--sequence", "Birth",
             "--times", "0,1", "--camera", "auto")
    (line,) = [ln for ln in r.stderr.splitlines() if "blank" in ln]
    assert "at 0 ms of sequence 1 'Birth'" in line and "try --time 500" in line
    assert line.endswith("(2 of the 2 frames are blank)")
    model = load_model(models / "particles.mdx")
    model.sequences = []
    save_model(model, tmp_path / "still.mdx")
    r = farm("render", tmp_path / "still.mdx", "-o", tmp_path / "s.png", "--size", 32)
    assert r.returncode == 0 and "(no sequence: the bind pose) is blank (fully transparent); the model has no" \
        " sequences" in r.stderr


def test_a_blank_frame_at_the_middle_suggests_another_time_and_many_sequences_are_not_listed():
    model, _ = effects()
    assert blank_warning("fx.mdx", model, 1, 500, "fully transparent").endswith(
        "try another --time (0..1000 ms of 'Birth') or another --sequence (Stand)")
    model.sequences = model.sequences * 5
    assert blank_warning("fx.mdx", model, 0, 0, "every pixel is #000000ff").endswith(
        "try --time 1500 (the middle of 'Stand') or another --sequence (10 sequences: farm inspect fx.mdx lists them)")
    model.sequences = []
    assert blank_warning("corpus/x.mdx", model, None, 0, "fully transparent", "/data/corpus/x.mdx").startswith(
        "corpus/x.mdx: the frame at 0 ms (no sequence: the bind pose) is blank (fully transparent)")
    assert "farm inspect /data/corpus/x.mdx shows what it holds" in blank_warning(
        "corpus/x.mdx", model, None, 0, "fully transparent", "/data/corpus/x.mdx")
