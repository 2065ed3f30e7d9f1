"""`farm inspect` and `farm convert` as a user runs them: output, JSON keys, exit status."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import CORPUS, ROOT

from renderer.formats import load_model
from renderer.samples import write_samples


def farm(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "farm.cli", *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=120)


@pytest.fixture(scope="module")
def samples(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("samples")
    write_samples(d)
    return d


def test_inspect_text_shows_what_a_modeller_needs(samples):
    r = farm("inspect", str(samples / "effects.mdx"))
    assert r.returncode == 0, r.stderr
    out = r.stdout
    assert "MDX version 800" in out
    assert "'Stand' [0, 3000]" in out and "'Birth' [4000, 5000] non-looping" in out
    assert "layer 0: Additive texture 3" in out
    assert "ParticleEmitter2 'Flame' parent 0" in out and "RibbonEmitter" in out
    assert "'Flame': Additive, Head, 1x1 cells, texture 0" in out
    assert "'Smoke': Blend, Head" in out
    assert "'Trail': material 1, 30/s" in out


def test_inspect_json_has_stable_keys(samples):
    r = farm("inspect", "--json", str(samples / "crate.mdx"))
    assert r.returncode == 0, r.stderr
    data = json.loads(r.stdout)
    assert sorted(data) == sorted([
        "path", "format", "version", "name", "chunks", "sequences", "global_sequences", "textures", "materials",
        "geosets", "nodes", "particle_emitters2", "ribbon_emitters", "event_objects", "cameras", "unknown_chunks",
        "diagnostics"])
    assert [c["tag"] for c in data["chunks"]][:2] == ["VERS", "MODL"]
    assert data["geosets"][0] == {"index": 0, "vertices": 24, "triangles": 12, "uv_sets": 2, "material_id": 0,
                                  "matrix_groups": 1, "skin": False, "tangents": False, "lod": 0}
    assert data["textures"][1]["replaceable_id"] == 1
    assert r.stdout == farm("inspect", "--json", str(samples / "crate.mdx")).stdout


def test_inspect_failure_prints_the_error_sentence_and_fails(tmp_path):
    bad = tmp_path / "bad.mdx"
    bad.write_bytes(b"MDLXVERS\x04\x00\x00\x00\x20\x03\x00\x00GEOS\xff\xff\x00\x00")
    r = farm("inspect", str(bad))
    assert r.returncode != 0
    assert f"{bad}: chunk GEOS at byte 20: chunk size 65535 runs past the end of the file" in r.stderr


def test_convert_mdx_to_mdl_and_back_gives_an_equal_model(samples, tmp_path):
    src = samples / "effects.mdx"
    mdl, back = tmp_path / "effects.mdl", tmp_path / "effects.mdx"
    assert farm("convert", str(src), str(mdl)).returncode == 0
    assert mdl.read_text().lstrip().startswith(("//", "Version"))
    assert farm("convert", str(mdl), str(back)).returncode == 0
    assert load_model(back) == load_model(src)


def test_convert_keeps_a_model_with_broken_indices(tmp_path):
    src = CORPUS / "zengfanfan__war3mdlx/test/all.mdx"
    if not src.exists():
        pytest.skip("corpus not present")
    r = farm("convert", str(src), str(tmp_path / "all.mdl"))
    assert r.returncode == 0, r.stderr
    assert "PVTX index 1 is vertex 1" in r.stderr


def test_inspect_corpus_models_of_every_version(corpus):
    for rel in ("pqhuy98__Warcraft3/silverpine-forest/maps/silverpine.w3x/Models/HarvestGolem/HarvestGolem.mdx",
                "nazarpunk__wc3-map-edemium-legacy/map/war3mapImported/Sweep_Fire_Large.mdx"):
        r = farm("inspect", "--json", str(corpus / rel))
        assert r.returncode == 0, r.stderr
        data = json.loads(r.stdout)
        assert data["nodes"] and data["geosets"]


def test_the_commands_printed_for_an_archive_entry_survive_its_name(tmp_path, monkeypatch, capsys):
    """`farm inspect X.w3x` prints commands a user pastes: an entry whose name holds a quote or a space
    must come back whole from the shell (shlex.split), in both the inspect and the render line."""
    import shlex

    import farm.cli.models as cli_models
    from farm.cli import main

    archive = tmp_path / "my maps" / "keep.w3x"
    archive.parent.mkdir()
    archive.write_bytes(b"MPQ\x1a")  # listed through list_models below: only its name and that it is a file count
    entry = f"{archive}:war3mapImported/it's a crate.mdx"
    monkeypatch.setattr(cli_models, "list_models", lambda path, listfile=None: [entry])
    assert main(["inspect", str(archive)]) == 0
    lines = {ln.split(":", 1)[0]: ln.split(":", 1)[1] for ln in capsys.readouterr().out.splitlines()
             if ln.startswith(("inspect one:", "render one:"))}
    assert shlex.split(lines["inspect one"]) == ["farm", "inspect", entry]
    assert shlex.split(lines["render one"]) == ["farm", "render", entry, "-o", "it's a crate.png"]
