"""Every render setting is one row of farm.settings.RENDER_SETTINGS, and every place a setting
appears (RenderSettings and its documents, FrameSpec, trace keys, manifests, farm render's flags,
farm view's command line) is made from the rows: each row's example value is taken through each."""

from __future__ import annotations

import json

import pytest

from farm.cli import build_parser
from farm.cli.options import render_settings
from farm.plan.keys import KEY_SETTINGS, TraceKeyError, parse_key, trace_key_for
from farm.plan.manifest import parse_manifest
from farm.settings import RENDER_SETTINGS, SIZE, RenderSettings, SettingError, flag_words
from renderer.frame import FrameSpec

ROWS = [s for s in RENDER_SETTINGS if s.example is not None]
DEFAULT_KEY = "m.mdx|Stand|0ms|auto|256x256|msaa0|team0|transparent"  # the key of 0.1, before optional parts


def _changed(row) -> RenderSettings:
    return RenderSettings(**row.spread(row.example))


def test_every_row_but_the_paths_has_an_example_and_the_fields_are_the_tables():
    assert {s.name for s in RENDER_SETTINGS if s.example is None} == {s.name for s in RENDER_SETTINGS if s.relative}
    assert RenderSettings.FIELDS == tuple(a for s in RENDER_SETTINGS for a in s.attrs)
    assert set(RenderSettings.FIELDS) <= set(FrameSpec.__dataclass_fields__)
    assert trace_key_for("m.mdx", "Stand", 0, RenderSettings()) == DEFAULT_KEY


@pytest.mark.parametrize("row", ROWS, ids=lambda s: s.name)
def test_a_setting_goes_through_documents_and_frame_specs(row):
    rs = _changed(row)
    assert row.value(rs) == row.example != row.default
    assert RenderSettings.from_dict(json.loads(json.dumps(rs.to_dict()))) == rs
    spec = rs.frame_spec(0, 0)
    assert all(getattr(spec, a) == v for a, v in row.spread(row.example).items())
    if row.omitted:  # at its default, documents are as they were before the setting existed
        assert not set(row.attrs) & set(RenderSettings().to_dict())


@pytest.mark.parametrize("row", [s for s in ROWS if s.key], ids=lambda s: s.name)
def test_a_setting_is_named_by_trace_keys_and_parsed_back(row):
    rs = _changed(row)
    key = trace_key_for("m.mdx", "Stand", 0, rs)
    assert key != DEFAULT_KEY and str(parse_key(key)) == key
    assert row.value(parse_key(key)) == row.example
    assert row in KEY_SETTINGS


@pytest.mark.parametrize("row", ROWS, ids=lambda s: s.name)
def test_a_setting_is_read_from_a_manifest_and_refused_at_its_line(row, tmp_path):
    (tmp_path / "m.mdx").write_bytes(b"")
    value = row.text(row.example)[0] if row.type is SIZE else row.example
    m = parse_manifest(f"{row.name} = {json.dumps(value)}\nmodels = [\"m.mdx\"]\n", tmp_path / "job.toml")
    assert row.value(m.plans[0].settings) == row.example
    with pytest.raises(ValueError, match=rf"job.toml:2: '{row.name}'"):
        parse_manifest(f"models = [\"m.mdx\"]\n{row.name} = {{ bad = 1 }}\n", tmp_path / "job.toml")


@pytest.mark.parametrize("row", ROWS, ids=lambda s: s.name)
def test_a_setting_is_a_flag_and_farm_views_command_gives_it_back(row):
    parser = build_parser(with_project=False)
    args = parser.parse_args(["render", "m.mdx", "-o", "x.png", row.flag, *row.text(row.example)])
    assert row.value(render_settings(args)) == row.example
    rs = _changed(row)
    words = flag_words(rs)
    again = render_settings(parser.parse_args(["render", "m.mdx", "-o", "x.png", *words]))
    assert again == rs and (row.flag in words) == (row.named or row.value(rs) != row.default)
    assert row.flag not in flag_words(RenderSettings()) or row.named


def test_a_key_part_that_names_no_setting_is_refused():
    with pytest.raises(TraceKeyError, match="no setting"):
        parse_key(DEFAULT_KEY + "|shadows=on")
    with pytest.raises(SettingError):
        RenderSettings(**{RENDER_SETTINGS[1].name: -1})


def test_the_background_alpha_setting_draws_a_translucent_background(tmp_path):
    """The setting added as one row and its use in the renderer: a #rrggbb background's opacity."""
    from renderer import Renderer, load_model
    from renderer.samples import write_samples

    write_samples(tmp_path)
    model = load_model(str(tmp_path / "crate.mdx"))
    with Renderer() as r:
        half, opaque = (r.render(model, RenderSettings(32, 32, background="#ff0000",
                                                       background_alpha=a).frame_spec(0, 0)) for a in (128, 255))
    assert half.rgba[0, 0].tolist() == [255, 0, 0, 128] and opaque.rgba[0, 0].tolist() == [255, 0, 0, 255]
    assert half.trace["background_alpha"] == 128 and "background_alpha" not in opaque.trace
    assert (half.rgba[16, 16] == opaque.rgba[16, 16]).all()  # the model covers the middle either way
