"""`farm thumbnails --animated [--frames N]` (issue 28, item 2): per model a looping animation of N
frames evenly over the chosen sequence next to the still (its poster), incremental like the stills,
named in index.json, played by index.html while the pointer is over the tile; contact sheets stay
stills."""

from __future__ import annotations

import io
import json
import os
from pathlib import Path

import numpy as np
import pytest

os.environ.setdefault("EGL_PLATFORM", "surfaceless")
os.environ.setdefault("PYOPENGL_PLATFORM", "egl")

import browser  # noqa: E402
from PIL import Image  # noqa: E402
from test_farm_celery import REDIS, worker  # noqa: E402, F401 - the module-scoped worker fixture

from farm.cli import main  # noqa: E402
from farm.images import read_animation  # noqa: E402
from farm.thumbs import ThumbnailError, ThumbnailOptions, make_thumbnails  # noqa: E402
from renderer.png import read_png  # noqa: E402
from renderer.samples import write_samples  # noqa: E402

needs_chromium = pytest.mark.skipif(browser.available() is not None, reason=browser.available() or "")


@pytest.fixture(autouse=True)
def no_broker(monkeypatch):
    monkeypatch.delenv("FARM_BROKER_URL", raising=False)


@pytest.fixture
def models(tmp_path: Path) -> Path:
    root = tmp_path / "models"
    write_samples(root)  # crate (Stand does not move), effects (Stand, 3000 ms, moves), filter_modes
    return root


def entries(out: Path) -> dict[str, dict]:
    return {e["id"]: e for e in json.loads((out / "index.json").read_text("utf-8"))["models"]}


def test_an_animated_thumbnail_is_n_frames_over_the_sequence_with_the_still_as_its_poster(models, tmp_path):
    out = tmp_path / "out"
    summary = make_thumbnails([models], out, ThumbnailOptions(size=40, sheet=4, animated=True, frames=6),
                              workers=1, progress=False)
    assert not summary.failed
    e = entries(out)["models/effects.mdx"]
    assert e["thumbnail"] == "thumbs/models/effects.mdx.png" and e["sequence"] == "Stand" and e["time_ms"] == 1500
    assert e["animation"] == "thumbs/models/effects.mdx.anim.png"
    assert e["animation_sidecar"] == "thumbs/models/effects.mdx.anim.png.json"
    data = (out / e["animation"]).read_bytes()
    with Image.open(io.BytesIO(data)) as im:
        assert im.format == "PNG" and im.is_animated and im.n_frames == 6 and im.info["loop"] == 0
    frames = read_animation(data)
    assert [d for _, d in frames] == [500] * 6  # 3000 ms over 6 frames: the loop lasts the sequence
    side = json.loads((out / e["animation_sidecar"]).read_text())
    assert [f["time_ms"] for f in side["frames"]] == [0, 500, 1000, 1500, 2000, 2500]
    assert [f["trace"]["time_ms"] for f in side["frames"]] == [0, 500, 1000, 1500, 2000, 2500]
    poster, trace = read_png(out / e["thumbnail"])
    assert side["frames"][3]["trace"] == trace  # the frame at the poster's time is the poster, trace and pixels
    np.testing.assert_array_equal(frames[3][0], poster)
    assert len({f.tobytes() for f, _ in frames}) == 6
    # the index names every animation; the contact sheet is a still
    for model_id in ("models/crate.mdx", "models/filter_modes.mdx"):
        assert (out / entries(out)[model_id]["animation"]).is_file()
    sheet = entries(out)["models/effects.mdx"]["sheet"]
    with Image.open(out / sheet) as im:
        assert not getattr(im, "is_animated", False)


def test_animated_thumbnails_are_incremental_and_go_when_not_asked(models, tmp_path):
    out = tmp_path / "out"
    opts = ThumbnailOptions(size=32, sheet=0, animated=True, frames=4, format="webp")
    assert len(make_thumbnails([models], out, opts, workers=1, progress=False).rendered) == 3
    anim = out / entries(out)["models/effects.mdx"]["animation"]
    assert anim.name == "effects.mdx.anim.webp" and len(read_animation(anim.read_bytes())) == 4
    before = anim.read_bytes()
    assert make_thumbnails([models], out, opts, workers=1, progress=False).rendered == []  # up to date
    anim.unlink()  # an animation gone: that model renders again, the others stay
    assert make_thumbnails([models], out, opts, workers=1, progress=False).rendered == ["models/effects.mdx"]
    assert anim.read_bytes() == before
    other = ThumbnailOptions(size=32, sheet=0, animated=True, frames=5, format="webp")
    assert len(make_thumbnails([models], out, other, workers=1, progress=False).rendered) == 3  # --frames counts
    assert len(read_animation(anim.read_bytes())) == 5
    still = ThumbnailOptions(size=32, sheet=0, format="webp")
    assert len(make_thumbnails([models], out, still, workers=1, progress=False).rendered) == 3
    assert not list(out.rglob("*.anim.*"))
    assert all(e["animation"] is None for e in entries(out).values())
    doc = json.loads((out / "index.json").read_text())
    assert "animated" not in doc["options"] and "frames" not in doc["options"]


def test_bad_frames_are_refused(models, tmp_path, capsys):
    with pytest.raises(ThumbnailError, match=r"^--frames must be 2\.\.240, not 1$"):
        make_thumbnails([models], tmp_path / "o", ThumbnailOptions(animated=True, frames=1))
    assert main(["thumbnails", str(models), "-o", str(tmp_path / "o"), "--animated", "--frames", "999"]) == 2
    assert capsys.readouterr().err == "error: --frames must be 2..240, not 999\n"


@needs_chromium
def test_index_html_plays_the_animation_while_the_pointer_is_over_the_tile(models, tmp_path):
    out = tmp_path / "out"
    make_thumbnails([models / "effects.mdx"], out, ThumbnailOptions(size=128, sheet=0, animated=True, frames=8),
                    workers=1, progress=False)
    e = entries(out)["models/effects.mdx"]
    src = "return document.querySelector('figure.tile img').getAttribute('src')"
    with browser.Browser() as b:
        b.get((out / "index.html").as_uri())
        b.wait_for("var i = document.querySelector('figure.tile img'); return i.complete && i.naturalWidth > 0")
        assert b.run(src).split("?")[0] == e["thumbnail"]
        still = [tmp_path / "still-1.png", tmp_path / "still-2.png"]
        b.screenshot(str(still[0]))
        b.screenshot(str(still[1]))
        assert still[0].read_bytes() == still[1].read_bytes()  # the poster does not move
        b.hover(b.find("figure.tile"))
        b.wait_for("return document.querySelector('figure.tile img').getAttribute('src').indexOf('anim') >= 0")
        assert b.run(src).split("?")[0] == e["animation"]  # the source is the animation now
        b.wait_for("var i = document.querySelector('figure.tile img'); return i.complete && i.naturalWidth > 0")
        shots = []

        def moved() -> bool:  # screenshots while hovering: the page shows different frames
            path = tmp_path / f"hover-{len(shots)}.png"
            b.screenshot(str(path))
            shots.append(np.asarray(Image.open(path).convert("RGB")))
            return len({s.tobytes() for s in shots}) > 1

        for _ in range(100):
            if moved():
                break
        assert len({s.tobytes() for s in shots}) > 1, "no frame changed while the pointer was over the tile"
        b.move_away()
        b.wait_for("return document.querySelector('figure.tile img').getAttribute('src').indexOf('anim') < 0")
        assert b.run(src).split("?")[0] == e["thumbnail"]
        assert b.severe_logs() == []


@pytest.mark.slow  # a real Celery worker (test_farm_celery's fixture) on a real Redis
def test_celery_and_local_animated_thumbnails_are_identical(worker, tmp_path):  # noqa: F811
    root = tmp_path / "models"
    write_samples(root)
    opts = ThumbnailOptions(size=32, sheet=0, animated=True, frames=4)
    remote = make_thumbnails([root], tmp_path / "celery", opts, broker=REDIS, progress=False)
    local = make_thumbnails([root], tmp_path / "local", opts, broker="local", workers=1, progress=False)
    assert (remote.mode, local.mode) == ("celery", "local") and not remote.failed and not local.failed
    files = sorted(p.relative_to(tmp_path / "local") for p in (tmp_path / "local").rglob("*")
                   if p.is_file() and ".farm" not in p.parts)
    assert Path("thumbs/models/effects.mdx.anim.png") in files
    for rel in files:  # stills, animations, sidecars and the index: the same bytes
        assert (tmp_path / "celery" / rel).read_bytes() == (tmp_path / "local" / rel).read_bytes(), rel


def test_animation_bytes_that_arrive_damaged_are_not_written(tmp_path):
    """The animation frame's digest is of the bytes its worker encoded: bytes that differ when they
    arrive give no animation file and null animation keys (the still stays the model's thumbnail)."""
    import base64
    import hashlib

    from farm.run.execute import BatchResult, FrameResult
    from farm.thumbs.run import _write_animation
    from farm.thumbs.state import ThumbState

    data = b"the animation's bytes"
    sent = {"animation": base64.b64encode(data).decode("ascii"), "animation_sidecar": {"format": "png", "frames": []}}
    state = ThumbState(tmp_path / ".farm")
    state.tmp.mkdir(parents=True)
    opts = ThumbnailOptions(animated=True, frames=2)
    written = []
    for digest in ("0" * 64, hashlib.sha256(data).hexdigest()):  # damaged in transit, then whole
        result = BatchResult("b", [FrameResult("m.mdx", 0, "done"), FrameResult("m.mdx\x00frame0000", 0, "done"),
                                   FrameResult("m.mdx\x00frame0001", 500, "done", digest=digest, info=sent)])
        written.append((_write_animation(result, tmp_path, opts, state), sorted(tmp_path.rglob("*.anim.png*"))))
    assert written[0] == ({"animation": None, "animation_sidecar": None, "animation_sha256": None}, [])
    rec, files = written[1]
    assert rec == {"animation": "thumbs/m.mdx.anim.png", "animation_sidecar": "thumbs/m.mdx.anim.png.json",
                   "animation_sha256": hashlib.sha256(data).hexdigest()}
    assert (tmp_path / rec["animation"]).read_bytes() == data and len(files) == 2
    assert json.loads((tmp_path / rec["animation_sidecar"]).read_text("utf-8")) == sent["animation_sidecar"]
