"""Trace keys are built from the settings object (`trace_key_for`), with exactly the bytes the
field-by-field builder of 0.2 made: goldens, job files and Celery messages name frames by them."""

from __future__ import annotations

import itertools

import pytest

from farm.plan.keys import parse_key, trace_key_for
from farm.settings import RenderSettings
from renderer.rules import LIGHTING_RULES


def _esc(text) -> str:
    return str(text).replace("%", "%25").replace("|", "%7C")


KEY_FIELDS_0_2 = ("camera", "width", "height", "msaa", "team", "background", "missing_textures", "lighting", "lights",
                  "events")  # the order key_of_0_2 takes them in


def key_of_0_2(model, sequence, time_ms, camera, width, height, msaa, team, background, missing_textures="checker",
               lighting="viewer", lights="off", events="off") -> str:
    """farm.plan.keys.trace_key as 0.2 had it (ms times; percent keys are checked below), for comparison."""
    parts = [_esc(model), "-" if sequence is None else _esc(sequence), f"{int(time_ms)}ms", _esc(camera),
             f"{int(width)}x{int(height)}", f"msaa{int(msaa)}", f"team{int(team)}", background]
    if missing_textures != "checker":
        parts.append(missing_textures)
    if lighting != "viewer":
        parts.append(f"lighting={lighting}")
    if lights != "off":
        parts.append(f"lights={lights}")
    if events != "off":
        parts.append(f"events={events}")
    return "|".join(parts)


GRID = [dict(width=w, height=h, msaa=m, team=t, background=bg, camera=cam, missing_textures=mt, lighting=li,
             lights=ls, events=ev)
        for (w, h), m, t, bg, cam, mt, li, ls, ev in itertools.product(
            [(64, 32), (8192, 1)], [0, 16], [0, 27], ["transparent", "#A0b0C0"], ["auto", "Cam 50%1", "1,2,3:0,0,0"],
            ["checker", "white"], sorted(LIGHTING_RULES), ["off", "model"], ["off", "model"])]


@pytest.mark.parametrize("model, sequence, time", [("models/crate.mdx", "Stand", 500), ("a|b%.mdx", None, 0),
                                                   ("x.mdx", "Attack|2 %7C", 4_294_967_295)])
def test_keys_from_settings_are_the_keys_of_0_2(model, sequence, time):
    assert "viewer" in LIGHTING_RULES and len(GRID) == 2 ** 7 * 3 * len(LIGHTING_RULES)
    for fields in GRID:
        rs = RenderSettings(**fields)
        key = trace_key_for(model, sequence, time, rs)
        # the settings as the builder of 0.2 took them (validated: "#a0b0c0", as every job had them)
        assert key == key_of_0_2(model, sequence, time, *(getattr(rs, f) for f in KEY_FIELDS_0_2))
        assert str(parse_key(key)) == key and trace_key_for(model, sequence, time, parse_key(key)) == key


def test_percent_keys_from_settings():
    rs = RenderSettings(width=64, height=32, missing_textures="white", events="model")
    key = trace_key_for("m.mdx", "Stand", "50.0%", rs)
    assert key == "m.mdx|Stand|50%|auto|64x32|msaa0|team0|transparent|white|events=model"
    k = parse_key(key)
    assert k.time_pct == "50%" and k.time_ms is None and str(k) == key


def test_default_settings_add_nothing_to_a_key():
    """Keys of 0.1 jobs (before the optional parts existed) are what default settings make."""
    key = trace_key_for("m.mdx", "Stand", 0, RenderSettings())
    assert key == "m.mdx|Stand|0ms|auto|256x256|msaa0|team0|transparent"
