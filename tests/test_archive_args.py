"""Archives wherever a folder or a model is accepted (issue 24, item 5), as a user runs `farm`:
`farm inspect X.w3x` lists the models inside and how to inspect or render one; `farm render X.w3x`
says in one sentence how to name an entry (ARCHIVE:ENTRY) and names some; a mistyped entry gets
the nearest ones; `farm thumbnails X.w3x` makes a thumbnail of every model inside."""

from __future__ import annotations

import json
import shlex
import shutil
import subprocess
import sys

import pytest
from conftest import ROOT
from PIL import Image

from renderer.samples import write_samples

ENV = {"EGL_PLATFORM": "surfaceless", "PYOPENGL_PLATFORM": "egl", "PATH": "/usr/bin:/bin"}
MODELS = ["war3mapImported/units/crate.mdx", "war3mapImported/units/effects.mdx", "war3mapImported/fx/filter_modes.mdx"]


def farm(*args, cwd=ROOT) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "farm.cli", *map(str, args)], cwd=cwd, capture_output=True,
                          text=True, timeout=300, env={**ENV, "PYTHONPATH": str(ROOT)})


@pytest.fixture(scope="module")
def packed(tmp_path_factory):
    """maps/keep.w3x, built with smpq: the three sample models under war3mapImported/, the samples'
    Textures\\ at the map's top, and a loose texture that is not a model."""
    mpq_build = pytest.importorskip("mpq_build")
    why = mpq_build.have_tools()
    if why:
        pytest.skip(why)
    base = tmp_path_factory.mktemp("archive")
    samples = base / "samples"
    write_samples(samples)
    src = base / "src"
    for rel in MODELS:
        (src / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(samples / rel.rsplit("/", 1)[-1], src / rel)
    shutil.copytree(samples / "Textures", src / "Textures")
    (src / "war3map.w3i").write_bytes(b"\0" * 16)
    return mpq_build.build(src, base / "maps" / "keep.w3x", map_header=True)


def test_inspect_lists_the_models_inside_and_its_example_command_works(packed):
    r = farm("inspect", packed)
    assert r.returncode == 0, r.stderr
    sources = [f"{packed}:{m}" for m in sorted(MODELS, key=str.lower)]
    assert r.stdout.splitlines()[:4] == [f"{packed}: an archive holding 3 model(s)", *(f"  {s}" for s in sources)]
    assert f"render one:  farm render '{sources[0]}' -o filter_modes.png" in r.stdout
    (line,) = [ln for ln in r.stdout.splitlines() if ln.startswith("inspect one: ")]
    again = farm(*shlex.split(line.removeprefix("inspect one: "))[1:])
    assert again.returncode == 0, again.stderr
    assert again.stdout.startswith(f"{sources[0]}: MDX version") and "chunks: VERS" in again.stdout
    data = json.loads(farm("inspect", packed, "--json").stdout)
    assert data == {"archive": str(packed), "models": sources}


def test_render_of_an_archive_explains_archive_entry_in_one_sentence(packed, tmp_path):
    out = tmp_path / "x.png"
    r = farm("render", packed, "-o", out)
    assert r.returncode == 2 and not out.exists()
    (line,) = r.stderr.splitlines()
    assert line.startswith(f"error: {packed} is an archive, not a model: name a model inside it as ARCHIVE:ENTRY,"
                           f" e.g. '{packed}:{MODELS[2]}'")
    assert all(f"{packed}:{m}" in line for m in MODELS) and f"farm inspect {packed} lists them all" in line


@pytest.mark.parametrize("typo, nearest", [("war3mapImported/units/crat.mdx", MODELS[0]),
                                           ("war3mapImported/units/efects.mdx", MODELS[1]),
                                           ("filtermodes.mdx", MODELS[2])])
def test_a_mistyped_entry_gets_the_nearest_entries(packed, tmp_path, typo, nearest):
    out = tmp_path / "x.png"
    r = farm("render", f"{packed}:{typo}", "-o", out)
    assert r.returncode == 2 and not out.exists()
    (line,) = r.stderr.splitlines()
    wanted = typo.replace("/", "\\")
    assert line.startswith(f"error: {packed}: archive: cannot open entry {wanted!r} (no such file); the nearest:"
                           f" {packed}:{nearest}"), line
    far = farm("render", f"{packed}:zzzz.mdx", "-o", out)
    assert f"cannot open entry 'zzzz.mdx' (no such file); it holds 3 model(s): {packed}:{MODELS[2]}" in far.stderr


def test_thumbnails_of_an_archive_render_every_model_inside(packed, tmp_path):
    out = tmp_path / "thumbs"
    r = farm("thumbnails", packed, "-o", out, "--size", 32, "--sheet", 0, "--workers", 1, "--no-progress")
    assert r.returncode == 0, r.stderr
    index = json.loads((out / "index.json").read_text())
    assert sorted(m["path"] for m in index["models"]) == sorted(f"keep.w3x:{m}" for m in MODELS)
    assert {m["status"] for m in index["models"]} == {"done"}
    for m in index["models"]:
        with Image.open(out / m["thumbnail"]) as im:
            assert im.size == (32, 32) and im.getextrema()[3][1] > 0  # drawn, not blank
    assert "3 models: 3 rendered" in r.stdout


def test_a_folder_given_as_a_model_is_listed_and_explained(packed, tmp_path):
    """An extracted map (a folder named like one, as maps often are) or any asset tree: inspect lists
    its models, archive entries too, and its example command works; render says in one sentence
    which models it holds and what to run."""
    tree = tmp_path / "extracted.w3x"
    write_samples(tree / "units")
    shutil.copy(packed, tree / "keep.w3x")
    r = farm("inspect", tree, "--json")
    assert r.returncode == 0, r.stderr
    models = json.loads(r.stdout)["models"]
    assert f"{tree}/units/crate.mdx" in models and f"{tree}/keep.w3x:war3mapImported/units/crate.mdx" in models
    r = farm("inspect", tree)
    assert r.returncode == 0 and f"a folder holding {len(models)} model(s)" in r.stdout, r.stdout
    example = next(line for line in r.stdout.splitlines() if line.startswith("inspect one: "))
    assert farm(*shlex.split(example.split(": ", 1)[1])[1:]).returncode == 0
    r = farm("render", tree, "-o", tmp_path / "x.png")
    assert r.returncode == 2 and "Traceback" not in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert "is a folder, not a model" in r.stderr and f"{len(models)} model(s)" in r.stderr
    assert f"farm thumbnails {tree}" in r.stderr and not (tmp_path / "x.png").exists()
