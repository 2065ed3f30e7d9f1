"""Trace keys parse back to what built them, and batches written by earlier versions (job files,
Celery messages: flat JSON objects) read back into the same batch, with the same id."""

from __future__ import annotations

import pytest

from farm.plan.batches import Batch
from farm.plan.keys import TraceKey, TraceKeyError, parse_key, trace_key_for
from farm.plan.manifest import ModelPlan
from farm.settings import RenderSettings, SettingError


@pytest.mark.parametrize("args", [
    ("models/crate.mdx", "Stand", 500, "auto", 64, 32, 4, 2, "#102030", "checker"),
    ("a|b%.mdx", None, 0, "auto", 1, 1, 0, 0, "transparent", "white"),
    ("x.mdx", "Attack|2 %7C", 4_294_967_295, "1,2,3:0,0,0", 8192, 8192, 16, 27, "transparent", "checker"),
    ("y.mdx", "Stand", 0, "auto", 8, 8, 0, 0, "transparent", "white", "farm-v0"),
    ("z.mdx", "Stand", 0, "auto", 8, 8, 0, 0, "transparent", "checker", "farm-v0"),
    ("w.mdx", "Stand", 0, "auto", 8, 8, 0, 0, "transparent", "white", "viewer", "model", "model"),
])
def test_parse_key_inverts_trace_key(args):
    names = ("camera", "width", "height", "msaa", "team", "background", "missing_textures", "lighting", "lights",
             "events")
    key = trace_key_for(*args[:3], RenderSettings(**dict(zip(names, args[3:], strict=False))))
    k = parse_key(key)
    assert (k.model, k.sequence, k.time_ms, k.camera, k.width, k.height, k.msaa, k.team, k.background,
            k.missing_textures, k.lighting, k.lights, k.events)[:len(args)] == args
    # Defaults are not spelled out, so keys made before these settings existed stay the same.
    assert ("lighting=" in key) == (len(args) >= 11 and args[10] != "viewer")
    assert ("lights=model" in key) == (len(args) >= 12) and ("events=model" in key) == (len(args) >= 13)
    assert str(k) == key
    assert k.rest == key.split("|", 1)[1] and k.model == args[0]


@pytest.mark.parametrize("bad", ["", "a|b", "m|s|10|auto|64x64|msaa0|team0|transparent",
                                 "m|s|10ms|auto|64|msaa0|team0|transparent", "m|s|10ms|auto|1x1|x0|team0|t"])
def test_parse_key_refuses_what_is_not_a_key(bad):
    with pytest.raises(TraceKeyError):
        parse_key(bad)
    assert isinstance(TraceKeyError("x"), ValueError)


# A batch exactly as modelfarm 0.1.0 (before farm/ was reorganised) wrote it into jobs/<id>.json and
# into Celery messages.
OLD_BATCH = {
    "id": "", "model": "/assets/crate.mdx", "model_rel": "crate.mdx", "model_digest": "ab" * 32, "sequence": 1,
    "sequence_name": "Stand", "times": [500, 0], "keys": ["crate.mdx|Stand|500ms|auto|64x32|msaa4|team3|#a0b0c0",
                                                         "crate.mdx|Stand|0ms|auto|64x32|msaa4|team3|#a0b0c0"],
    "width": 64, "height": 32, "msaa": 4, "background": "#a0b0c0", "camera": "auto", "team": 3,
    "missing_textures": "checker", "assets": ["/assets/textures"], "provisional": False,
}


def test_old_batches_read_back_the_same():
    b = Batch.from_dict(OLD_BATCH)
    assert b.settings == RenderSettings(64, 32, 4, "#a0b0c0", "auto", 3, "checker", ("/assets/textures",))
    assert b.times == [0, 500] and b.keys[0].startswith("crate.mdx|Stand|0ms")
    d = b.to_dict()
    assert {k: v for k, v in d.items() if k not in ("id", "times", "keys")} == \
        {k: v for k, v in OLD_BATCH.items() if k not in ("id", "times", "keys")}
    assert Batch.from_dict(d).to_dict() == d and Batch.from_dict(d).id == b.id
    spec = b.frame_spec(1, 250)
    assert (spec.width, spec.height, spec.msaa, spec.team, spec.background, spec.assets, spec.time_ms) == \
        (64, 32, 4, 3, "#a0b0c0", ("/assets/textures",), 250)


def test_old_model_plans_read_back_the_same():
    old = {"path": "/a/x.mdx", "rel": "x.mdx", "assets": [], "width": 128, "height": 128, "msaa": 0,
           "background": "transparent", "camera": "auto", "team": 0, "missing_textures": "white",
           "sequences": ["Stand"], "timestamps": [0, "50%"], "every": None, "thresholds": {"min_ssim": 0.9},
           "entry": 1, "line": 3}
    p = ModelPlan.from_dict(old)
    assert p.settings.missing_textures == "white" and p.timestamps == (0, "50%")
    assert p.to_dict() == old


def test_a_batch_with_a_bad_setting_is_refused_with_the_setting_named():
    with pytest.raises(SettingError, match="team must be between 0 and 27, not 99"):
        Batch.from_dict({**OLD_BATCH, "team": 99})
    with pytest.raises(SettingError, match="explicit camera"):
        RenderSettings(camera="nan,0,0:0,0,0")
    assert TraceKey("m", None, 0, "auto", 1, 1, 0, 0, "transparent").rest == "-|0ms|auto|1x1|msaa0|team0|transparent"


def test_long_sequences_are_cut_into_even_batches():
    from farm.plan.batches import chunks

    assert [len(c) for c in chunks(list(range(100)), 48)] == [34, 33, 33]
    assert chunks([5], 48) == [[5]] and chunks([], 48) == [[]]
    parts = chunks(list(range(0, 1000, 10)), 7)
    assert [t for c in parts for t in c] == list(range(0, 1000, 10)) and max(map(len, parts)) <= 7
