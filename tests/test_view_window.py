"""farm view's real window under Xvfb: a script of user steps through the window's own handlers, a
screenshot of the window showing the model, and the saved frame reproduced by the printed command.
Skipped when there is no X server to start (xvfb-run) or no glfw."""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys

import numpy as np
import pytest
from conftest import ROOT

from renderer.png import read_png
from renderer.samples import write_samples


def _window_env():
    if shutil.which("xvfb-run") is None:
        pytest.skip("xvfb-run is not installed (apt-get install xvfb; scripts/system-deps.sh)")
    try:
        import glfw  # noqa: F401
    except Exception as e:  # noqa: BLE001 - ImportError, or libglfw missing
        pytest.skip(f"glfw is not usable: {e}")
    env = dict(os.environ)
    env.setdefault("EGL_PLATFORM", "surfaceless")
    env.setdefault("PYOPENGL_PLATFORM", "egl")
    return env


def test_scripted_window_session(tmp_path):
    env = _window_env()
    crate = [p for p in write_samples(tmp_path / "samples") if p.stem == "crate"][0]
    shot = tmp_path / "shot.png"
    script = (f"orbit 30 -10; mouse left 8 4; zoom 1; wheel -1; key ]; press right; key right; press t; key w; press w;"
              f" mouse right 3 2; key s; screenshot {shot}; quit")
    run = subprocess.run(["xvfb-run", "-a", "-s", "-screen 0 640x480x24", sys.executable, "-m", "farm.cli.view",
                          str(crate), "--size", "128x96", "--out", str(tmp_path), "--script", script],
                         cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    if run.returncode != 0 and "cannot open a window" in run.stderr:
        pytest.skip(f"no GL window under Xvfb here: {run.stderr.strip()}")
    assert run.returncode == 0, run.stderr + run.stdout
    lines = run.stdout.splitlines()
    saved = tmp_path / "crate_seq1_100ms_00.png"
    assert f"saved {saved}; reproduce with:" in lines
    command = lines[lines.index(f"saved {saved}; reproduce with:") + 1].strip()
    argv = shlex.split(command)
    assert argv[:3] == ["farm", "render", str(crate)] and "--camera" in argv and "--sequence" in argv
    camera = argv[argv.index("--camera") + 1]
    assert camera.count(":") == 1 and all(len(p.split(",")) == 3 for p in camera.split(":"))  # ex,ey,ez:tx,ty,tz

    # The window shows the model: not the empty clear colour, and the model's opaque pixels are the frame's own.
    pixels, _ = read_png(shot)
    frame, trace = read_png(saved)
    assert pixels.shape == frame.shape == (96, 128, 4)
    assert trace["sequence"] == "Spin" and trace["time_ms"] == 100 and trace["team"] == 1
    opaque = frame[..., 3] == 255
    assert opaque.sum() > 500
    np.testing.assert_allclose(pixels[opaque][:, :3].astype(int), frame[opaque][:, :3].astype(int), atol=1)
    assert len(np.unique(pixels.reshape(-1, 4), axis=0)) > 50

    # The printed command draws the saved frame again, byte for byte.
    again = tmp_path / "again.png"
    argv[argv.index("-o") + 1] = str(again)
    rerun = subprocess.run([sys.executable, "-m", "farm.cli", *argv[1:]], cwd=ROOT, env=env, capture_output=True,
                           text=True, timeout=300)
    assert rerun.returncode == 0, rerun.stderr
    assert again.read_bytes() == saved.read_bytes()
