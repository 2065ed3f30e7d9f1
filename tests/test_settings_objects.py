"""Thumbnail options and the view's state hold a RenderSettings (issue 25: settings are not re-listed):
what they draw, the options they write (index.json, the thumbnails' fingerprints) and the command the
view prints stay what they were."""

from __future__ import annotations

import pytest

import farm.cli.thumbnails as thumbnails_cli
from farm.cli import main
from farm.look import DEFAULT_CAMERA
from farm.settings import RenderSettings
from farm.thumbs import ThumbnailOptions
from farm.thumbs.run import THUMBNAIL_RENDER, _render_options


@pytest.fixture
def captured(monkeypatch, tmp_path):
    seen = {}

    def fake(roots, out, opts, **kw):
        seen["opts"] = opts
        raise thumbnails_cli.ThumbnailError("stop here")

    monkeypatch.setattr(thumbnails_cli, "make_thumbnails", fake)
    return seen


def test_thumbnail_options_from_the_command_line(captured, tmp_path, capsys):
    argv = ["thumbnails", str(tmp_path), "--out", str(tmp_path / "o"), "--size", "48", "--team", "3", "--msaa", "2",
            "--missing-textures", "white", "--camera", "auto", "--game", str(tmp_path), "--assets", str(tmp_path)]
    assert main(argv) == 2 and "stop here" in capsys.readouterr().err
    opts = captured["opts"]
    assert opts.render == RenderSettings(msaa=2, camera="auto", team=3, missing_textures="white",
                                         game=(str(tmp_path),))
    # What every thumbnail is drawn with (job files and Celery messages carry it), as 0.2 built it.
    assert opts.settings(("/a",)) == RenderSettings(width=48, height=48, msaa=2, team=3, missing_textures="white",
                                                    assets=("/a",), game=(str(tmp_path),), camera="auto")
    # The options of each thumbnail's fingerprint: the same keys, values and order as 0.2's.
    assert list(_render_options(opts, ["/a"]).items())[2:] == [
        ("size", 48), ("sequence", None), ("time", None), ("format", "png"), ("team", 3), ("msaa", 2),
        ("missing_textures", "white"), ("assets", ["/a"]), ("camera", "auto"), ("game", [str(tmp_path)])]


def test_thumbnail_defaults(captured, tmp_path):
    assert main(["thumbnails", str(tmp_path), "--out", str(tmp_path / "o")]) == 2
    opts = captured["opts"]
    assert opts == ThumbnailOptions() and opts.render == THUMBNAIL_RENDER
    assert opts.settings() == RenderSettings(width=256, height=256, msaa=4, camera=DEFAULT_CAMERA)
    assert "game" not in _render_options(opts, [])


def test_a_bad_thumbnail_camera_is_one_sentence(tmp_path, capsys):
    assert main(["thumbnails", str(tmp_path), "--out", str(tmp_path / "o"), "--camera", "a|b"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: camera must be") and "Traceback" not in err
