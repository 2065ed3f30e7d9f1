"""`farm render M -o -` / `-o /dev/stdout` (issue 34 item 7): stdout holds the PNG alone, whether it
is a file (`> so.png`) or a pipe; the status line and warnings go to stderr."""

from __future__ import annotations

import subprocess
import sys

import pytest
from conftest import ROOT
from farm_cli import ENV

from renderer.png import read_png
from renderer.samples import write_samples


@pytest.fixture(scope="module")
def crate(tmp_path_factory):
    folder = tmp_path_factory.mktemp("samples")
    write_samples(folder)
    return folder / "crate.mdx"


@pytest.mark.parametrize("dest", ["-", "/dev/stdout"])
def test_render_to_stdout_writes_the_png_alone(tmp_path, crate, dest):
    cmd = [sys.executable, "-m", "farm.cli", "render", str(crate), "-o", dest, "--size", "24"]
    so = tmp_path / "so.png"
    with open(so, "wb") as f:  # `> so.png`
        done = subprocess.run(cmd, cwd=ROOT, stdout=f, stderr=subprocess.PIPE, env=ENV, timeout=300)
    assert done.returncode == 0, done.stderr
    rgba, trace = read_png(so.read_bytes())
    assert rgba.shape == (24, 24, 4) and rgba[..., 3].any() and trace["model"]
    assert b"t=1000 ms" in done.stderr
    piped = subprocess.run(cmd, cwd=ROOT, capture_output=True, env=ENV, timeout=300)  # `| next`
    assert piped.returncode == 0, piped.stderr
    assert piped.stdout == so.read_bytes()
    assert not (ROOT / "-").exists()
