"""The corpus maps in folder form and packed into MPQ archives: every texture the folder form finds
is found in the archive form, byte for byte, and a frame from the archive equals the frame from the
folder, pixel for pixel."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import CORPUS
from mpq_build import build, have_tools

from renderer.assets import AssetSearch, ModelLocation
from renderer.assets.search import is_map_folder
from renderer.assets.sources import source_name
from renderer.assets.trees import AssetFolder
from renderer.formats import load_model

pytestmark = pytest.mark.skipif(have_tools() is not None, reason=str(have_tools()))


def map_roots() -> list:
    roots = []
    for d in sorted(p for p in CORPUS.rglob("*") if p.is_dir()):
        if not any(d.is_relative_to(r) for r in roots) and is_map_folder(AssetFolder(d.parent), (d.name,)):
            roots.append(d)
    return roots


def models(root) -> list:
    return sorted(p for p in root.rglob("*") if p.suffix.lower() in (".mdx", ".mdl") and p.is_file())


@pytest.fixture(scope="module")
def packed(tmp_path_factory):
    roots = map_roots()
    if not roots:
        pytest.skip("no corpus maps")
    tmp = tmp_path_factory.mktemp("maps")
    out = []
    for i, root in enumerate(roots):
        out.append((root, build(root, tmp / f"map{i}.w3x", encrypt=True, map_header=True),
                    build(root, tmp / f"unlisted{i}.w3m", listfile=False)))
    return out


def lookups(search: AssetSearch, model) -> dict:
    out = {}
    for t in model.textures:
        if str(t.path):
            found = search.find(str(t.path))
            out[str(t.path)] = None if found is None else found.sha256
    return out


def test_corpus_maps_were_found(corpus):
    names = {r.name for r in map_roots()}
    assert {"map", "test map", "silverpine.w3x", "icecrown-citadel.w3x", "risk_asia.w3x"} <= names


def test_archive_form_finds_what_the_folder_form_finds(packed):
    total_found = 0
    for root, archive, unlisted in packed:
        for m in models(root):
            folder_model = load_model(m)
            entry = m.relative_to(root).as_posix()
            want = lookups(AssetSearch.for_model(ModelLocation(folder=m.parent)), folder_model)
            total_found += sum(v is not None for v in want.values())
            for arch in (archive, unlisted):
                model = load_model(source_name(arch, entry))
                got = lookups(AssetSearch.for_model(ModelLocation.from_path(model.path)), model)
                assert got == want, (m, arch)
    assert total_found >= 23  # what the folder forms find today (bench/assets.py)


def test_archive_model_record_names_archive_entries(packed):
    root, archive, _ = next(p for p in packed if p[0].name == "map")
    model = load_model(source_name(archive, "war3mapImported/Ghost.mdx"))
    search = AssetSearch.for_model(ModelLocation.from_path(model.path))
    lookups(search, model)
    found = [e["found"] for e in search.record if not e.get("missing")]
    assert found and all(f.startswith(f"{archive}:") for f in found)
    assert search.looked() == [f"{archive}:war3mapImported", str(archive)]


@pytest.mark.parametrize("rel", ["war3mapImported/Ghost.mdx", "war3mapImported/ET_Barrel01.mdx"])
def test_frame_from_archive_equals_frame_from_folder(packed, rel):
    from render_util import renderer

    from renderer.frame import FrameSpec

    root, archive, _ = next(p for p in packed if p[0].name == "map")
    folder_model = load_model(root / rel)
    archive_model = load_model(source_name(archive, rel))
    spec = FrameSpec(width=96, height=96)
    r = renderer()
    try:
        a = r.render(folder_model, spec)
        b = r.render(archive_model, spec)
    finally:
        r.forget(folder_model)
        r.forget(archive_model)
    assert np.array_equal(a.rgba, b.rgba)
    assert a.trace["model_hash"] == b.trace["model_hash"]
    assert [e.get("sha256") for e in a.assets] == [e.get("sha256") for e in b.assets]
    assert a.assets and not a.missing_assets
    assert (a.rgba[..., 3] > 0).sum() > 100  # something was drawn
