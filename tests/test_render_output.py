"""`farm render -o` by extension (issue 24, item 7): .png, .webp (lossless, the trace in a .json sidecar
as `farm thumbnails --format webp` keeps it); anything else is refused in one sentence before rendering."""

from __future__ import annotations

import io
import json

import numpy as np
import pytest
from farm_cli import farm
from PIL import Image

from renderer.png import read_png
from renderer.samples import write_samples


@pytest.fixture(scope="module")
def samples(tmp_path_factory):
    d = tmp_path_factory.mktemp("samples")
    write_samples(d)
    return d


@pytest.mark.parametrize("name, why", [("x.jpg", "not .jpg"), ("x", "not none"), ("x.png.tmp", "not .tmp")])
def test_an_output_that_is_not_png_or_webp_is_refused_in_one_sentence_before_rendering(tmp_path, name, why):
    out = tmp_path / name
    r = farm("render", tmp_path / "no-such-model.mdx", "-o", out)  # refused before the model is even read
    assert r.returncode == 2
    assert r.stderr == f"error: -o {out}: the extension picks the format and must be .png or .webp, {why}\n"
    assert list(tmp_path.iterdir()) == []


def test_webp_is_lossless_with_the_pngs_pixels_and_its_trace_in_a_sidecar(samples, tmp_path):
    args = [samples / "effects.mdx", "--size", "64x48", "--sequence", "Stand", "--time", "1200"]
    png, webp = tmp_path / "x.png", tmp_path / "x.webp"
    assert farm("render", *args, "-o", png).returncode == 0
    r = farm("render", *args, "-o", webp)
    assert r.returncode == 0, r.stderr
    data = webp.read_bytes()
    assert data[:4] == b"RIFF" and data[8:12] == b"WEBP" and b"VP8L" in data[:64]  # VP8L: the lossless bitstream
    with Image.open(io.BytesIO(data)) as im:
        assert im.format == "WEBP"
        pixels = np.asarray(im.convert("RGBA"))
    rgba, trace = read_png(png)
    assert 0 < (rgba[..., 3] > 0).sum() < rgba[..., 3].size and len(np.unique(rgba[..., 3])) > 2
    np.testing.assert_array_equal(pixels, rgba)  # every channel, translucent edges and all
    sidecar = json.loads((tmp_path / "x.webp.json").read_text())
    assert sidecar["trace"] == trace and sidecar["diagnostic_count"] == len(sidecar["diagnostics"])
    assert sorted(p.name for p in tmp_path.iterdir()) == ["x.png", "x.webp", "x.webp.json"]


def test_several_times_keep_their_numbered_names_in_either_format(samples, tmp_path):
    for out in (tmp_path / "f.webp", tmp_path / "g.PNG"):
        r = farm("render", samples / "crate.mdx", "--times", "0,500", "--size", "16", "-o", out)
        assert r.returncode == 0, r.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "f_0000_0ms.webp", "f_0000_0ms.webp.json", "f_0001_500ms.webp", "f_0001_500ms.webp.json",
        "g_0000_0ms.PNG", "g_0001_500ms.PNG"]
    rgba, trace = read_png(tmp_path / "g_0001_500ms.PNG")
    assert trace["time_ms"] == 500
    with Image.open(tmp_path / "f_0001_500ms.webp") as im:
        np.testing.assert_array_equal(np.asarray(im.convert("RGBA")), rgba)
