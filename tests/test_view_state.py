"""farm view's state without a window (farm/view/state.py): keys and drags -> camera, time,
sequence and toggles; the printed `farm render` command reproduces a saved frame byte for byte."""

from __future__ import annotations

import math
import subprocess
import sys

import numpy as np
import pytest
from conftest import ROOT

from farm.look import default_time
from farm.view.state import (
    BACKGROUNDS,
    ORBIT_DEG_PER_PX,
    SCRIPT_STEPS,
    SCRUB_MS,
    ViewState,
    parse_script,
)
from renderer.camera import parse_explicit, resolve_camera
from renderer.formats import load_model
from renderer.samples import write_samples


@pytest.fixture(scope="module")
def samples(tmp_path_factory):
    out = tmp_path_factory.mktemp("samples")
    return {p.stem: p for p in write_samples(out)}


def state_of(path, **kw) -> ViewState:
    return ViewState.for_model(load_model(path), str(path), **kw)


def test_without_a_renderer_the_state_starts_at_the_auto_camera_and_the_default_time(samples):
    """The window moves it to the fit camera (ViewState.frame_default: tests/test_default_look.py); the
    time is the default look's (farm.look.default_time: the middle of the first sequence) already."""
    model = load_model(samples["crate"])
    s = ViewState.for_model(model, str(samples["crate"]), width=128, height=128)
    auto = resolve_camera("auto", model, 0, 1.0)
    np.testing.assert_allclose(s.eye, auto.eye, atol=1e-9)
    np.testing.assert_allclose(s.target, auto.target, atol=1e-9)
    cam = parse_explicit(s.camera_spec())
    np.testing.assert_allclose(cam.eye, auto.eye, atol=1e-4)
    assert (s.sequence, s.time_ms, s.playing, s.sequences) == (0, 1000, False, ("Stand", "Spin", "Death"))
    assert s.time_ms == default_time(model, 0) == (model.sequences[0].interval[1] - model.sequences[0].interval[0]) // 2


def test_orbit_pan_zoom(samples):
    s = state_of(samples["crate"], width=100, height=100)
    yaw, pitch, d, target = s.yaw, s.pitch, s.distance, s.target
    s.drag("left", 20, 0)  # 20 px right: yaw - 10 degrees
    assert s.yaw == pytest.approx(yaw - 20 * ORBIT_DEG_PER_PX) and s.pitch == pytest.approx(pitch)
    assert math.dist(s.eye, s.target) == pytest.approx(d)
    s.drag("left", 0, 1000)  # pitch stops short of the pole
    assert s.pitch == 89.0
    s.apply(("orbit", 30.0, pitch - 89.0))  # back down to where it was
    assert s.yaw == pytest.approx(yaw + 20.0) and s.pitch == pytest.approx(pitch)
    s.zoom(2)
    assert s.distance == pytest.approx(d * 0.81) and s.target == target
    before = np.array(s.eye)
    s.drag("right", 10, 0)  # the target moves left in the view plane: the model follows the cursor right
    moved = np.array(s.target) - np.array(target)
    np.testing.assert_allclose(np.array(s.eye) - before, moved, atol=1e-9)
    assert np.dot(moved, np.array(s.eye) - np.array(s.target)) == pytest.approx(0, abs=1e-9)
    assert moved[2] == pytest.approx(0, abs=1e-9) and np.linalg.norm(moved) > 0
    s.key("r")
    assert (s.yaw, s.pitch, s.distance, s.target) == (yaw, pitch, d, target)


def test_keys_change_sequence_time_and_toggles(samples):
    s = state_of(samples["crate"])
    assert s.key("]") is None and s.sequence == 1
    s.key("]"), s.key("]")
    assert s.sequence == 2  # no wrap past the last
    s.key("[")
    assert s.sequence == 1
    s.key("1")
    assert s.sequence == 0
    s.key("3")
    assert s.sequence == 2 and s.time_ms == 0
    s.key("9")  # no such sequence: unchanged
    assert s.sequence == 2
    s.key("right"), s.key("right")
    assert s.time_ms == 2 * SCRUB_MS
    s.key("left")
    assert s.time_ms == SCRUB_MS
    for _ in range(100):
        s.key("right")
    assert s.time_ms == 1000  # Death is 1000 ms: scrubbing stops at the end
    s.key("space")
    assert s.playing
    s.tick(0.4), s.tick(0.4), s.tick(0.4)
    assert s.time_ms == 0  # 1001 wraps to 0; the sub-ms remainder is kept
    s.tick(100)
    assert s.time_ms == 100
    s.key("left")
    assert not s.playing and s.time_ms == 50
    s.key("]")  # past the last: same sequence, time kept
    assert s.time_ms == 50
    s.key("t"), s.key("t")
    assert s.render.team == 2
    s.key("b")
    assert s.render.background == BACKGROUNDS[1]
    assert (s.key("w"), s.key("m"), s.key("l"), s.key("e")) == (None, None, None, None)
    assert s.wireframe and (s.render.missing_textures, s.render.lights, s.render.events) == ("white", "model", "model")
    s.key("w"), s.key("m"), s.key("l"), s.key("e")
    assert not s.wireframe
    assert (s.render.missing_textures, s.render.lights, s.render.events) == ("checker", "off", "off")
    assert s.key("s") == "save" and s.key("q") == "quit" and s.key("escape") == "quit"


def test_a_script_is_a_key_sequence(samples):
    events = parse_script("orbit 30 0; drag right 4 -2; pan 1 1; zoom -1; key ]; key SPACE; tick 250; key s;"
                          " screenshot out.png; quit")
    assert events == [("orbit", 30.0, 0.0), ("drag", "right", 4.0, -2.0), ("pan", 1.0, 1.0), ("zoom", -1.0),
                      ("key", "]"), ("key", "space"), ("tick", 250.0), ("key", "s"), ("screenshot", "out.png"),
                      ("quit",)]
    s = state_of(samples["crate"])
    actions = [s.apply(e) for e in events]
    assert actions[-3:] == ["save", "screenshot", "quit"]
    assert (s.sequence, s.time_ms, s.playing) == (1, 250, True)
    # The window's callback steps act like their plain forms.
    t = state_of(samples["crate"])
    for e in parse_script("mouse left 10 0; wheel 1; press ]; press t"):
        t.apply(e)
    u = state_of(samples["crate"])
    for e in parse_script("drag left 10 0; zoom 1; key ]; key t"):
        u.apply(e)
    assert t == u
    with pytest.raises(ValueError, match="orbit DYAW DPITCH"):
        parse_script("spin 3")


def test_view_help_lists_every_script_step_the_parser_takes():
    """`farm view --help` is where a user finds the steps (screenshot included): each step it lists parses,
    with its placeholders filled in, and each step kind the parser takes is listed."""
    out = subprocess.run([sys.executable, "-m", "farm.cli", "view", "--help"], cwd=ROOT, capture_output=True,
                         text=True, timeout=60).stdout
    listed = out.split("script steps", 1)[1].split("\n\n", 1)[0]
    fill = {"DYAW": "1", "DPITCH": "2", "DX": "3", "DY": "4", "CLICKS": "1", "NAME": "s", "MS": "5",
            "PATH": "x.png", "left|right": "left"}
    kinds = set()
    for syntax, _ in SCRIPT_STEPS:
        assert syntax in listed, syntax
        step = " ".join(fill.get(w, w) for w in syntax.split())
        (event,) = parse_script(step)
        kinds.add(event[0])
    assert {"screenshot", "quit", "orbit", "drag", "pan", "zoom", "key", "tick", "press", "mouse", "wheel"} <= kinds
    for word in ("spin 1", "screenshot", "orbit 1"):  # and nothing else parses
        with pytest.raises(ValueError):
            parse_script(word)


def test_the_command_names_every_setting(samples):
    s = state_of(samples["crate"], width=96, height=64)
    s.key("l"), s.key("w"), s.key("t"), s.key("b"), s.key("m"), s.key("]"), s.key("right")
    argv = s.command("x.png")
    assert argv[:5] == ["farm", "render", str(samples["crate"]), "-o", "x.png"]
    pairs = dict(zip(argv[5::1], argv[6::1], strict=False))
    assert pairs["--sequence"] == "1" and pairs["--time"] == str(SCRUB_MS) and pairs["--size"] == "96x64"
    assert pairs["--camera"] == s.camera_spec() and s.camera_spec().count(":") == 1
    assert pairs["--team"] == "1" and pairs["--background"] == "#000000"
    assert pairs["--missing-textures"] == "white" and pairs["--lights"] == "model" and "--wireframe" in argv
    assert "--events" not in argv  # only when on: the command of a frame without events is as before
    s.key("e")
    assert s.command("x.png") == [*argv[:-1], "--events", "model", "--wireframe"] and argv[-1] == "--wireframe"
    assert s.frame_spec().events == "model" and s.settings().events == "model"
    s.key("e")
    spec = s.frame_spec()
    assert (spec.sequence, spec.time_ms, spec.camera, spec.team, spec.lights, spec.wireframe) == (
        1, SCRUB_MS, s.camera_spec(), 1, "model", True)


@pytest.mark.parametrize("name, keys", [
    ("crate", ["]", "right", "right", "t", "b", "w"]),
    ("effects", ["right", "right", "right", "l", "b", "b"]),
    ("effects", ["right", "right", "e", "b"]),  # event visuals on: --events model in the printed command
])
def test_the_printed_command_reproduces_the_saved_frame_byte_for_byte(samples, tmp_path, name, keys):
    from render_util import renderer  # noqa: F401 - sets the EGL environment of render tests

    from renderer.frame import Renderer
    from renderer.png import write_png

    model = load_model(samples[name])
    s = ViewState.for_model(model, str(samples[name]), width=96, height=96)
    for k in keys:
        s.key(k)
    s.drag("left", 37, -11), s.drag("right", 5, 3), s.zoom(1)
    saved = tmp_path / "saved.png"
    r = Renderer()
    try:
        frame = r.render(model, s.frame_spec())
        write_png(saved, frame.rgba, frame.trace)
    finally:
        r.close()
    argv = s.command(str(tmp_path / "again.png"))
    assert argv[:2] == ["farm", "render"]
    run = subprocess.run([sys.executable, "-m", "farm.cli", *argv[1:]], cwd=ROOT, capture_output=True, text=True,
                         timeout=300)
    assert run.returncode == 0, run.stderr
    assert (tmp_path / "again.png").read_bytes() == saved.read_bytes()


def test_wireframe_frames_differ_and_say_so_in_the_trace(samples):
    from render_util import renderer

    from renderer.frame import FrameSpec

    model = load_model(samples["crate"])
    filled = renderer().render(model, FrameSpec(width=64, height=64))
    lines = renderer().render(model, FrameSpec(width=64, height=64, wireframe=True))
    again = renderer().render(model, FrameSpec(width=64, height=64))
    assert lines.trace["wireframe"] is True and "wireframe" not in filled.trace
    assert not np.array_equal(lines.rgba, filled.rgba) and np.array_equal(again.rgba, filled.rgba)
    assert (lines.rgba[..., 3] > 0).sum() < (filled.rgba[..., 3] > 0).sum()


@pytest.mark.parametrize("argv", [["view", "{a}", "--hidden", "--script", "quit"], ["render", "{a}", "-o", "x.png"],
                                  ["convert", "{a}", "x.mdl"]])
def test_an_archive_given_as_the_model_gets_the_same_sentence_from_every_command(tmp_path, capsys, argv):
    """`farm view X.w3x`, like render and convert, says how to name a model inside an archive (not
    "unknown model format"); the archive here is damaged, so listing it fails too, in the same sentence."""
    from farm.cli import main

    archive = tmp_path / "keep.w3x"
    archive.write_bytes(b"junk")
    args = [a.format(a=archive) for a in argv]
    code = main(args)
    err = capsys.readouterr().err
    assert code == 2 and err.startswith(f"error: {archive} is an archive, not a model: name a model inside it as"
                                        f" ARCHIVE:ENTRY") and err.count("\n") == 1, err
