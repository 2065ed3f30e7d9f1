"""`farm render` as a user runs it: sequences by name, several timestamps, errors that help."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest
from conftest import ROOT

from renderer.png import read_png
from renderer.samples import write_samples

ENV = {"EGL_PLATFORM": "surfaceless", "PYOPENGL_PLATFORM": "egl", "PATH": "/usr/bin:/bin"}


def farm(*args) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "farm.cli", *map(str, args)], cwd=ROOT, capture_output=True,
                          text=True, timeout=120, env=ENV)


@pytest.fixture(scope="module")
def samples(tmp_path_factory):
    d = tmp_path_factory.mktemp("samples")
    write_samples(d)
    return d


def test_every_renders_numbered_files_of_one_sequence(samples, tmp_path):
    r = farm("render", samples / "crate.mdx", "--sequence", "SPIN", "--every", "500", "--size", "48x32",
             "-o", tmp_path / "spin.png")
    assert r.returncode == 0, r.stderr
    files = sorted(tmp_path.glob("spin_*.png"))
    assert [f.name for f in files] == ["spin_0000_0ms.png", "spin_0001_500ms.png", "spin_0002_1000ms.png",
                                       "spin_0003_1500ms.png", "spin_0004_2000ms.png"]
    first, trace = read_png(files[0])
    assert first.shape == (32, 48, 4) and trace["sequence"] == "Spin" and trace["time_ms"] == 0
    assert not np.array_equal(first, read_png(files[1])[0])


def test_times_list(samples, tmp_path):
    r = farm("render", samples / "effects.mdx", "--times", "0,250,500", "--size", "32x32", "-o", tmp_path / "e.png")
    assert r.returncode == 0, r.stderr
    assert len(list(tmp_path.glob("e_*.png"))) == 3


def test_unknown_sequence_lists_the_models_sequences(samples, tmp_path):
    r = farm("render", samples / "crate.mdx", "--sequence", "Attack", "-o", tmp_path / "x.png")
    assert r.returncode != 0
    assert "Attack" in r.stderr and "'Stand'" in r.stderr and "'Spin'" in r.stderr and "'Death'" in r.stderr
    assert not (tmp_path / "x.png").exists()


def test_bad_camera_and_background_are_clear_errors(samples, tmp_path):
    r = farm("render", samples / "crate.mdx", "--camera", "Portrait", "-o", tmp_path / "x.png")
    assert r.returncode != 0 and "no camera named 'Portrait'" in r.stderr
    r = farm("render", samples / "crate.mdx", "--background", "pink", "-o", tmp_path / "x.png")
    assert r.returncode != 0 and "background must be" in r.stderr


def test_team_colour_reaches_the_pixels(samples, tmp_path):
    colours = []
    for team in (0, 1):
        out = tmp_path / f"team{team}.png"
        r = farm("render", samples / "crate.mdx", "--team", team, "--size", "64x64", "--camera",
                 "200,0,40:0,0,40:0,0,1:30", "-o", out)
        assert r.returncode == 0, r.stderr
        colours.append(read_png(out)[0][..., :3].reshape(-1, 3).astype(int))
    red = ((colours[0][:, 0] > 150) & (colours[0][:, 2] < 80)).sum()
    blue = ((colours[1][:, 2] > 150) & (colours[1][:, 0] < 80)).sum()
    assert red > 100 and blue > 100  # team 0 red shows through the crate's clear cells; team 1 blue


def test_many_warnings_are_a_few_lines_and_a_count(samples, tmp_path):
    """A model missing many textures: the first few warnings and one line counting the rest (issue 33
    item 6: one Reforged model printed 48 long lines); -v prints every one."""
    from dataclasses import replace

    from renderer.formats import load_model
    from renderer.formats.mdx.write import write_mdx

    model = load_model(str(samples / "crate.mdx"))
    extra = [replace(model.textures[0], path=f"Textures\\Gone{i}.blp") for i in range(8)]
    model.textures = [*model.textures, *extra]
    lonely = tmp_path / "lonely"
    lonely.mkdir()
    (lonely / "many.mdx").write_bytes(write_mdx(model))
    r = farm("render", lonely / "many.mdx", "--size", "16", "-o", tmp_path / "m.png")
    assert r.returncode == 0, r.stderr
    warnings = [line for line in r.stderr.splitlines() if line.startswith("warning: ")]
    every = farm("render", lonely / "many.mdx", "--size", "16", "-o", tmp_path / "v.png", "-v")
    all_warnings = [line for line in every.stderr.splitlines() if line.startswith("warning: ")]
    assert len(all_warnings) >= 10 and sum("Gone" in w for w in all_warnings) == 8
    assert warnings[:3] == all_warnings[:3] and len(warnings) == 4
    assert warnings[3].endswith(f"{len(all_warnings) - 3} more warning(s); -v lists them all")
