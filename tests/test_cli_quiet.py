"""`-q` prints errors only, on every command: no summary, note, hint or warning; errors still whole."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from renderer.samples import write_samples

ENV = {**os.environ, "EGL_PLATFORM": "surfaceless", "PYOPENGL_PLATFORM": "egl"}


def farm(*argv, cwd):
    return subprocess.run([sys.executable, "-m", "farm.cli", *map(str, argv)], cwd=cwd, env=ENV,
                          capture_output=True, text=True, timeout=300)


@pytest.fixture(scope="module")
def samples(tmp_path_factory):
    root = tmp_path_factory.mktemp("q")
    write_samples(root / "models")
    (root / "models" / "Textures" / "Glow.tga").unlink()  # a missing texture: a warning without -q
    (root / "job.toml").write_text('name = "q"\nsize = "32x32"\ntimestamps = [0]\nmodels = ["models/crate.mdx"]\n')
    return root


def test_render_with_a_missing_texture(samples):
    loud = farm("render", "models/crate.mdx", "-o", "a.png", "--size", "32", cwd=samples)
    assert loud.returncode == 0 and "Glow.tga" in loud.stderr  # the warning a user normally sees
    quiet = farm("render", "models/crate.mdx", "-o", "b.png", "--size", "32", "-q", cwd=samples)
    assert quiet.returncode == 0 and (quiet.stdout, quiet.stderr) == ("", "")
    assert (samples / "a.png").read_bytes() == (samples / "b.png").read_bytes()


def test_run_and_status(samples):
    loud = farm("run", "job.toml", "--out", "store", "--workers", "1", cwd=samples)
    assert loud.stdout.strip() and loud.returncode in (0, 1)  # the summary and the bootstrap hint
    quiet = farm("run", "job.toml", "--out", "store2", "--workers", "1", "-q", cwd=samples)
    assert quiet.returncode == loud.returncode and (quiet.stdout, quiet.stderr) == ("", "")
    assert farm("status", "latest", "--out", "store2", "-q", cwd=samples).stdout == ""


def test_json_is_kept_and_errors_are_shown(samples):
    out = farm("status", "latest", "--out", "store3", "--json", "-q", cwd=samples)  # no such store: an error
    assert out.returncode == 2 and out.stdout == ""
    assert out.stderr.startswith("error: ") and len(out.stderr.strip().splitlines()) == 1
    farm("run", "job.toml", "--out", "store3", "--workers", "1", "-q", cwd=samples)
    status = farm("status", "latest", "--out", "store3", "--json", "-q", cwd=samples)
    assert status.returncode == 0 and status.stderr == ""
    counts = json.loads(status.stdout)
    assert counts["done"] == counts["total"] > 0
    bad = farm("render", "models/nothing.mdx", "-o", "x.png", "-q", cwd=samples)
    assert bad.returncode == 2 and bad.stderr.startswith("error: ") and "nothing.mdx" in bad.stderr
