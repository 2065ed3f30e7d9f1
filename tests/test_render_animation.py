"""`farm render --animate` (issue 28, item 1): one looping animated image instead of numbered stills,
.webp and .png (APNG) lossless, .gif a lossy preview; every frame is the pixels of the separate still
render of its time, each lasts until the next timestamp (or 1000/--fps ms), and the OUT.json sidecar
keeps every frame's trace."""

from __future__ import annotations

import json

import numpy as np
import pytest
from farm_cli import farm
from PIL import Image

from farm.images import encode_animation, read_animation
from renderer.png import read_png
from renderer.samples import write_samples


@pytest.fixture(scope="module")
def samples(tmp_path_factory):
    d = tmp_path_factory.mktemp("samples")
    write_samples(d)
    return d


@pytest.fixture(scope="module")
def stills(samples, tmp_path_factory):
    """effects.mdx's Stand every 250 ms as separate PNG stills: [(time, rgba, trace)]."""
    d = tmp_path_factory.mktemp("stills")
    r = farm("render", samples / "effects.mdx", "--sequence", "Stand", "--every", "250", "--size", "40x32",
             "-o", d / "s.png")
    assert r.returncode == 0, r.stderr
    files = sorted(d.glob("s_*.png"))
    return [(int(p.stem.split("_")[2][:-2]), *read_png(p)) for p in files]


def shown_at(frames: list[tuple[np.ndarray, int]], t: int) -> np.ndarray:
    """The frame an animation shows `t` ms after it starts."""
    start = 0
    for rgba, duration in frames:
        if t < start + duration:
            return rgba
        start += duration
    raise AssertionError(f"the animation ends at {start} ms, before {t} ms")


@pytest.mark.parametrize("name", ["a.webp", "a.png"])
def test_a_lossless_animation_is_its_stills_frame_for_frame_with_their_traces(samples, stills, tmp_path, name):
    out = tmp_path / name
    r = farm("render", samples / "effects.mdx", "--sequence", "Stand", "--every", "250", "--size", "40x32",
             "--animate", "-o", out)
    assert r.returncode == 0, r.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == [name, name + ".json"]  # one image, not numbered stills
    frames = read_animation(out.read_bytes())
    assert len(stills) > 8 and len(frames) == len(stills)
    with Image.open(out) as im:
        assert im.is_animated and im.n_frames == len(stills) and im.info.get("loop") == 0
    for (t, still, _), (rgba, duration) in zip(stills, frames, strict=True):
        assert duration == 250
        assert (rgba[..., 3] > 0).any() and 0 < len(np.unique(rgba[..., 3]))
        np.testing.assert_array_equal(rgba, still, err_msg=f"{name}: the frame at {t} ms")  # every byte of RGBA
    assert len({f[0].tobytes() for f in frames}) == len(frames)  # it moves
    sidecar = json.loads((tmp_path / (name + ".json")).read_text())
    assert sidecar["lossless"] is True and sidecar["loop"] == 0 and sidecar["format"] == name[-4:].lstrip(".")
    assert [f["time_ms"] for f in sidecar["frames"]] == [t for t, _, _ in stills]
    assert [f["trace"] for f in sidecar["frames"]] == [trace for _, _, trace in stills]
    assert r.stdout.startswith(f"{out}: {len(stills)} frames, t=0..{stills[-1][0]} ms")


def test_durations_follow_the_timestamps_or_fps(samples, tmp_path):
    args = [samples / "effects.mdx", "--sequence", "Stand", "--size", "16"]
    assert farm("render", *args, "--times", "0,250,600,700", "--animate", "-o", tmp_path / "t.webp").returncode == 0
    assert [d for _, d in read_animation((tmp_path / "t.webp").read_bytes())] == [250, 350, 100, 100]
    r = farm("render", *args, "--times", "0,250,600", "--fps", "30", "-o", tmp_path / "f.png")  # --fps animates
    assert r.returncode == 0, r.stderr
    assert [d for _, d in read_animation((tmp_path / "f.png").read_bytes())] == [33, 34, 33]
    sidecar = json.loads((tmp_path / "f.png.json").read_text())
    assert [f["duration_ms"] for f in sidecar["frames"]] == [33, 34, 33]


def test_a_gif_is_a_lossy_animation_of_every_frame(samples, stills, tmp_path):
    out = tmp_path / "a.gif"  # .gif always animates: no --animate
    r = farm("render", samples / "effects.mdx", "--sequence", "Stand", "--every", "250", "--size", "40x32", "-o", out)
    assert r.returncode == 0, r.stderr
    assert "lossy preview" in r.stdout
    with Image.open(out) as im:
        assert im.format == "GIF" and im.is_animated and im.n_frames == len(stills) and im.info.get("loop") == 0
    frames = read_animation(out.read_bytes())
    assert [d for _, d in frames] == [250] * len(stills)
    for (t, still, _), (rgba, _) in zip(stills, frames, strict=True):  # close, not exact: a palette per frame
        visible = (still[..., 3] == 255) & (rgba[..., 3] == 255)
        assert visible.sum() > 0.5 * (still[..., 3] == 255).sum(), t
        assert np.abs(rgba[visible][:, :3].astype(int) - still[visible][:, :3]).mean() < 12, t
    assert json.loads((tmp_path / "a.gif.json").read_text())["lossless"] is False


@pytest.mark.parametrize("fmt", ["webp", "png", "gif"])
def test_identical_frames_merge_into_one_that_lasts_their_total(fmt):
    a = np.zeros((6, 5, 4), np.uint8)
    a[1, 1] = (10, 20, 30, 255)
    b = a.copy()
    b[2, 3] = (200, 100, 0, 255)
    frames = read_animation(encode_animation([a, a, b, b, a], [100, 100, 50, 30, 40], fmt))
    assert [d for _, d in frames] == [200, 80, 40]
    for t, want in ((0, a), (199, a), (200, b), (279, b), (280, a), (319, a)):
        np.testing.assert_array_equal(shown_at(frames, t), want)


def test_a_model_that_does_not_move_animates_to_a_still_of_every_frame(samples, tmp_path):
    """crate.mdx's first sequence does not move: WebP and APNG write one still picture (there is nothing
    to animate), equal to each still; the sidecar still lists every frame rendered."""
    args = [samples / "crate.mdx", "--times", "0,100,200,500", "--size", "24"]
    assert farm("render", *args, "-o", tmp_path / "s.png").returncode == 0
    for name in ("a.webp", "a.png"):
        r = farm("render", *args, "--animate", "-o", tmp_path / name)
        assert r.returncode == 0, r.stderr
        (rgba, _), = read_animation((tmp_path / name).read_bytes())
        for i, t in enumerate((0, 100, 200, 500)):
            np.testing.assert_array_equal(rgba, read_png(tmp_path / f"s_{i:04d}_{t}ms.png")[0])
        sidecar = json.loads((tmp_path / (name + ".json")).read_text())
        assert [f["time_ms"] for f in sidecar["frames"]] == [0, 100, 200, 500]


@pytest.mark.parametrize("args, message", [
    (["--animate", "-o", "/dev/stdout"],
     "-o /dev/stdout: an animation's frame traces go in a sidecar next to it, and /dev/stdout is a device or a"
     " pipe; name a file instead (e.g. anim.webp)"),
    (["--fps", "0", "-o", "{tmp}/a.webp"], "--fps must be more than 0 and at most 1000 frames a second, not 0"),
    (["--animate", "-o", "{tmp}/a.jpg"], "-o {tmp}/a.jpg: the extension picks the format and must be .png or .webp,"
                                         " not .jpg"),
    (["--animate", "--every", "1", "--size", "4096", "-o", "{tmp}/a.webp"],
     "-o {tmp}/a.webp: 3,001 frames of 4096x4096 hold 187.6 GiB until the animation is encoded, more than 4 GiB;"
     " render fewer frames (--every) or smaller ones"),
])
def test_bad_animation_options_are_refused_in_one_sentence_before_rendering(samples, tmp_path, args, message):
    args = [a.format(tmp=tmp_path) for a in args]
    r = farm("render", samples / "effects.mdx", "--sequence", "Stand", *args)
    assert r.returncode == 2, r.stderr
    assert r.stderr == f"error: {message.format(tmp=tmp_path)}\n"
    assert list(tmp_path.iterdir()) == []
