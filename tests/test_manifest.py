"""Job manifests: parsing, defaults and overrides, and every kind of error, each naming its line."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from farm.plan.manifest import ManifestError, load_manifest, parse_manifest
from farm.plan.toml_lines import key_lines


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    (tmp_path / "models" / "units").mkdir(parents=True)
    (tmp_path / "textures").mkdir()
    for rel in ("models/a.mdx", "models/b.mdx", "models/units/c.mdx", "models/notes.txt"):
        (tmp_path / rel).write_bytes(b"MDLX")
    return tmp_path


def parse(tree: Path, text: str):
    path = tree / "job.toml"
    path.write_text(textwrap.dedent(text).lstrip("\n"))
    return load_manifest(path)


def error(tree: Path, text: str) -> ManifestError:
    with pytest.raises(ManifestError) as e:
        parse(tree, text)
    return e.value


def test_full_manifest(tree):
    m = parse(tree, """
        name = "nightly"
        assets = ["textures"]
        size = "64x32"
        msaa = 4
        background = "#A0B0C0"
        camera = "100,0,0:0,0,0:0,0,1:40"
        team = 3
        missing_textures = "white"
        sequences = ["Stand", 1]
        timestamps = [500, "0%", "50%", "100%", 500]

        [thresholds]
        ssim = 0.98
        pixel_bound = 8

        [[thresholds.traces]]
        match = "models/a.mdx|*"
        max_pixels_over = 0.01

        [[models]]
        paths = ["models/**/*.mdx"]

        [[models]]
        path = "models/b.mdx"
        size = [256, 256]
        every = 250
        sequences = "all"
        thresholds = { min_ssim = 0.9 }
        """)
    assert m.name == "nightly"
    by = {p.rel: p for p in m.plans}
    assert sorted(by) == ["models/a.mdx", "models/b.mdx", "models/units/c.mdx"]
    a, b = by["models/a.mdx"], by["models/b.mdx"]
    a_s = a.settings
    assert (a_s.width, a_s.height, a_s.msaa, a_s.background, a_s.team, a_s.missing_textures) == \
        (64, 32, 4, "#a0b0c0", 3, "white")
    assert a.settings.assets == (str((tree / "textures").resolve()),)
    assert a.sequences == ["Stand", 1]
    assert a.timestamps == (500, "0%", "50%", "100%") and a.every is None
    assert a.thresholds == {"min_ssim": 0.98, "pixel_delta": 8}  # aliases stored canonically
    # the later entry wins for b: its own size, every, sequences; thresholds merged over the job's
    assert (b.settings.width, b.settings.height, b.every, b.timestamps, b.sequences) == (256, 256, 250, None, "all")
    assert b.thresholds == {"min_ssim": 0.9, "pixel_delta": 8}
    assert b.entry == 2 and a.entry == 1
    assert m.trace_thresholds[0].match == "models/a.mdx|*"
    assert m.trace_thresholds[0].values == {"max_pixels_over": 0.01}
    assert m.trace_thresholds[0].line == 16


def test_defaults(tree):
    m = parse(tree, """
        [[models]]
        path = "models/a.mdx"
        """)
    p = m.plans[0]
    assert m.name == "job"
    s = p.settings
    assert (s.width, s.height, s.msaa, s.background, s.camera, s.team) == (256, 256, 0, "transparent", "auto", 0)
    assert p.sequences == "all" and p.timestamps == (0,) and p.thresholds == {}


def test_key_lines_tables_arrays_and_inline():
    text = textwrap.dedent("""
        size = "1x1"
        [thresholds]
        ssim = 0.9
        [[thresholds.traces]]
        match = "x"
        [[models]]
        path = "a"
        timestamps = [
          0,
          "50%",
        ]
        ["quoted"]
        [[models]]
        paths = ["b"]   # a comment
        thresholds = { min_ssim = 0.5, "pixel_delta" = 3 }
        """).lstrip("\n")
    lines = key_lines(text)
    assert lines[("size",)] == 1
    assert lines[("thresholds", "ssim")] == 3
    assert lines[("thresholds", "traces", 0, "match")] == 5
    assert lines[("models", 0)] == 6
    assert lines[("models", 0, "timestamps")] == 8
    assert lines[("models", 1, "paths")] == 14
    assert lines[("models", 1, "thresholds", "pixel_delta")] == 15
    assert ("0",) not in lines and ("quoted",) in lines  # array items are not keys


@pytest.mark.parametrize("text, line, words", [
    # unknown keys, with a suggestion
    ('sise = "1x1"\n[[models]]\npath = "models/a.mdx"\n', 1, ["unknown key 'sise'", "did you mean 'size'"]),
    ('[[models]]\npath = "models/a.mdx"\nsequence = "all"\n', 3, ["unknown key 'sequence'", "[[models]] #1",
                                                                 "'sequences'"]),
    ('[[models]]\npath = "models/a.mdx"\n[[models]]\npath = "models/b.mdx"\ntimestamp = [1]\n', 5,
     ["[[models]] #2", "unknown key 'timestamp'"]),
    ('[thresholds]\nssim_min = 0.5\n[[models]]\npath = "models/a.mdx"\n', 2, ["unknown threshold 'ssim_min'"]),
    ('[[models]]\npath = "models/a.mdx"\nthresholds = { ssim = 0.5, delta = 3 }\n', 3, ["unknown threshold 'delta'"]),
    # wrong types and values
    ('msaa = "4"\n[[models]]\npath = "models/a.mdx"\n', 1, ["'msaa' must be an integer", "string '4'"]),
    ('msaa = 3\n[[models]]\npath = "models/a.mdx"\n', 1, ["'msaa' must be one of 0, 1, 2, 4, 8, 16"]),
    ('team = 28\n[[models]]\npath = "models/a.mdx"\n', 1, ["'team' must be between 0 and 27"]),
    ('team = true\n[[models]]\npath = "models/a.mdx"\n', 1, ["'team' must be an integer", "boolean"]),
    ('[[models]]\npath = "models/a.mdx"\nsize = "big"\n', 3, ["'size' must look like"]),
    ('size = [0, 10]\n[[models]]\npath = "models/a.mdx"\n', 1, ["0x10 is outside 1..8192"]),
    ('background = "red"\n[[models]]\npath = "models/a.mdx"\n', 1, ["\"transparent\" or \"#rrggbb\""]),
    ('camera = "1,2:3"\n[[models]]\npath = "models/a.mdx"\n', 1, ["explicit camera"]),
    ('missing_textures = "pink"\n[[models]]\npath = "models/a.mdx"\n', 1, ["\"checker\" or \"white\""]),
    ('sequences = "Stand"\n[[models]]\npath = "models/a.mdx"\n', 1, ["\"all\" or a list", "['Stand']"]),
    ('sequences = []\n[[models]]\npath = "models/a.mdx"\n', 1, ["non-empty list"]),
    ('timestamps = 100\n[[models]]\npath = "models/a.mdx"\n', 1, ["'timestamps' must be a non-empty list"]),
    ('timestamps = [0, -5]\n[[models]]\npath = "models/a.mdx"\n', 1, ["'timestamps'[1] must be >= 0 ms"]),
    ('timestamps = [0, "150%"]\n[[models]]\npath = "models/a.mdx"\n', 1, ["from \"0%\" to \"100%\"", "'150%'"]),
    ('timestamps = [0, 1.5]\n[[models]]\npath = "models/a.mdx"\n', 1, ["integer (ms) or a fraction", "float"]),
    ('every = 0\n[[models]]\npath = "models/a.mdx"\n', 1, ["'every' must be at least 1"]),
    ('[[models]]\npath = "models/a.mdx"\ntimestamps = [0]\nevery = 10\n', 4, ["both 'timestamps' and 'every'"]),
    ('[thresholds]\nmin_ssim = "high"\n[[models]]\npath = "models/a.mdx"\n', 2, ["'min_ssim'", "must be a number"]),
    ('[thresholds]\npixel_delta = 300\n[[models]]\npath = "models/a.mdx"\n', 2, ["between 0 and 255"]),
    ('[thresholds]\nssim = 0.9\nmin_ssim = 0.8\n[[models]]\npath = "models/a.mdx"\n', 3, ["'min_ssim' twice"]),
    ('[[thresholds.traces]]\nssim = 0.9\n[[models]]\npath = "models/a.mdx"\n', 1, ["needs 'match'"]),
    ('[[thresholds.traces]]\nmatch = "x*"\n[[models]]\npath = "models/a.mdx"\n', 1, ["gives no threshold"]),
    ('name = "has space"\n[[models]]\npath = "models/a.mdx"\n', 1, ["'name' must be"]),
    # models: missing, empty, globs that match nothing, folders that are not there
    ('size = "1x1"\n', None, ["no [[models]]"]),
    ('models = []\n', 1, ["array of tables"]),
    ('[[models]]\nsize = "1x1"\n', 1, ["needs 'path'"]),
    ('[[models]]\npath = "models/a.mdx"\npaths = ["models/b.mdx"]\n', 3, ["both 'path' and 'paths'"]),
    ('[[models]]\npaths = [\n  "models/a.mdx",\n  "models/*.mdz",\n]\n', 2, ["glob 'models/*.mdz' matches no file"]),
    ('# job\n\n[[models]]\npath = "models/zzz.mdx"\n', 4, ["path 'models/zzz.mdx' matches no file"]),
    ('[[models]]\npath = "models/units"\n', 2, ["matches no file"]),  # a folder is not a model
    ('assets = ["nowhere"]\n[[models]]\npath = "models/a.mdx"\n', 1, ["asset root 'nowhere' is not a folder"]),
    # TOML itself
    ('[[models]]\npath = "models/a.mdx"\nsize = \n', 3, ["TOML syntax"]),
])
def test_errors_name_the_line(tree, text, line, words):
    e = error(tree, text)
    assert e.line == line, str(e)
    for w in words:
        assert w in str(e), str(e)
    assert str(e).startswith(f"{tree / 'job.toml'}:{line}: " if line else f"{tree / 'job.toml'}: ")


def test_unreadable_and_not_utf8(tree):
    with pytest.raises(ManifestError, match="cannot read"):
        load_manifest(tree / "missing.toml")
    (tree / "bad.toml").write_bytes(b'name = "x"\n\xff\n')
    with pytest.raises(ManifestError) as e:
        load_manifest(tree / "bad.toml")
    assert e.value.line == 2 and "UTF-8" in str(e.value)


def test_glob_order_dedup_and_absolute(tree):
    m = parse(tree, f"""
        [[models]]
        paths = ["models/b.mdx", "models/*.mdx", "{(tree / 'models/units/c.mdx').as_posix()}"]
        """)
    assert [p.rel for p in m.plans] == ["models/a.mdx", "models/b.mdx", "models/units/c.mdx"]


def test_model_outside_the_manifest_folder(tree):
    sub = tree / "jobs"
    sub.mkdir()
    (sub / "j.toml").write_text('[[models]]\npath = "../models/a.mdx"\n')
    assert load_manifest(sub / "j.toml").plans[0].rel == "../models/a.mdx"


def test_parse_text_directly(tree):
    m = parse_manifest('[[models]]\npath = "a.mdx"\n', tree / "models" / "inline.toml")
    assert m.plans[0].rel == "a.mdx" and m.name == "inline"


def test_models_shorthand_list_of_globs(tree):
    m = parse(tree, """
        size = "64x64"
        models = ["models/*.mdx", "models/units/*.mdx"]
        """)
    assert sorted(p.rel for p in m.plans) == ["models/a.mdx", "models/b.mdx", "models/units/c.mdx"]
    assert {(p.settings.width, p.settings.height) for p in m.plans} == {(64, 64)}
