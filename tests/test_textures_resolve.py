"""Texture path resolution: case-insensitive components, search order, basename and extension
fallbacks, refusal of paths and symlinks that leave the roots, and the real corpus cases."""

from __future__ import annotations

import os
import struct
from pathlib import Path

import pytest
from conftest import corpus_path

from renderer.formats.textures import TextureResolver, decode_texture


def touch(path: Path, text: str = "x") -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def texs_paths(mdx: bytes) -> list[str]:
    """Texture paths from an MDX file's TEXS chunk (268-byte records)."""
    at = 4
    while at + 8 <= len(mdx):
        tag, size = mdx[at : at + 4], struct.unpack_from("<I", mdx, at + 4)[0]
        if tag == b"TEXS":
            records = mdx[at + 8 : at + 8 + size]
            return [records[i + 4 : i + 264].split(b"\0")[0].decode() for i in range(0, size, 268)]
        at += 8 + size
    return []


@pytest.fixture
def tree(tmp_path):
    root = tmp_path / "root"
    model_dir = root / "Units" / "Footman"
    touch(root / "Textures" / "Footman.BLP", "root")
    touch(root / "ReplaceableTextures" / "TeamColor" / "TeamColor00.dds", "dds")
    touch(model_dir / "Local.blp", "local")
    touch(model_dir / "Footman.mdx")
    return root, model_dir


def test_case_insensitive_components_and_backslashes(tree):
    root, model_dir = tree
    found, notes = TextureResolver([root], model_dir).resolve("textures\\FOOTMAN.blp")
    assert found == root / "Textures" / "Footman.BLP" and notes == []
    found, _ = TextureResolver([root], model_dir).resolve("Textures/footman.blp")
    assert found == root / "Textures" / "Footman.BLP"


def test_model_folder_first_then_roots_in_order(tree, tmp_path):
    root, model_dir = tree
    second = tmp_path / "second"
    touch(second / "Textures" / "Footman.blp", "second")
    touch(second / "Textures" / "OnlyHere.blp")
    touch(model_dir / "Textures" / "Footman.blp", "model")
    resolver = TextureResolver([root, second], model_dir)
    assert resolver.resolve("Textures\\Footman.blp")[0].read_text() == "model"
    assert TextureResolver([second, root], tmp_path / "none").resolve("Textures\\Footman.blp")[0].read_text() == (
        "second"
    )
    assert resolver.resolve("Textures\\OnlyHere.blp")[0] == second / "Textures" / "OnlyHere.blp"


def test_basename_fallback_in_model_folder(tree):
    root, model_dir = tree
    found, notes = TextureResolver([root], model_dir).resolve("war3mapImported\\LOCAL.BLP")
    assert found == model_dir / "Local.blp"
    assert len(notes) == 1 and "by basename" in notes[0].message


def test_extension_fallback_named_extension_first(tree):
    root, model_dir = tree
    resolver = TextureResolver([root], model_dir)
    found, notes = resolver.resolve("ReplaceableTextures\\TeamColor\\TeamColor00.blp")
    assert found == root / "ReplaceableTextures" / "TeamColor" / "TeamColor00.dds"
    assert "extension fallback to .dds" in notes[0].message
    touch(root / "ReplaceableTextures" / "TeamColor" / "TeamColor01.blp")
    touch(root / "ReplaceableTextures" / "TeamColor" / "TeamColor01.dds")
    found, notes = TextureResolver([root], model_dir).resolve("ReplaceableTextures\\TeamColor\\TeamColor01.dds")
    assert found.name == "TeamColor01.dds" and notes == []
    # The named extension anywhere beats a fallback extension in an earlier place.
    touch(model_dir / "Textures" / "Footman.dds")
    assert resolver.resolve("Textures\\Footman.blp")[0] == root / "Textures" / "Footman.BLP"


def test_not_found_lists_what_was_tried(tree):
    root, model_dir = tree
    found, notes = TextureResolver([root], model_dir).resolve("Textures\\Missing.blp")
    assert found is None
    assert "not found" in notes[-1].message and ".blp, .dds, .tga" in notes[-1].message


def test_directories_are_indexed_lazily_and_once(tree, monkeypatch):
    root, model_dir = tree
    touch(root / "Deep" / "A" / "B" / "unrelated.blp")
    listed: list[str] = []
    real_scandir = os.scandir
    monkeypatch.setattr(os, "scandir", lambda p: (listed.append(os.fspath(p)), real_scandir(p))[1])
    resolver = TextureResolver([root], model_dir)
    resolver.resolve("Textures\\Footman.blp")
    resolver.resolve("Textures\\Footman.blp")
    assert sorted(listed) == sorted({str(model_dir), str(root), str(root / "Textures")})
    assert not any("Deep" in p for p in listed)


def test_several_case_variants_prefer_exact_case(tmp_path):
    for name in ("skin.blp", "Skin.blp", "SKIN.blp"):
        touch(tmp_path / name, name)
    found, notes = TextureResolver([], tmp_path).resolve("Skin.blp")
    assert found.read_text() == "Skin.blp"
    assert "3 entries" in notes[0].message
    found, _ = TextureResolver([], tmp_path).resolve("sKiN.blp")
    assert found.read_text() == "SKIN.blp"  # no exact match: sorted order


@pytest.mark.parametrize(
    "path",
    [
        "..\\secret.blp",
        "Textures\\..\\..\\secret.blp",
        "Textures/../secret.blp",
        "Textures\\.. \\secret.blp",
        "Textures\\...\\secret.blp",
        "C:\\Windows\\secret.blp",
        "c:secret.blp",
        "\\\\server\\share\\secret.blp",
        "//server/share/secret.blp",
        "\\secret.blp",
        "/etc/passwd",
        "Textures\\a:stream.blp",
        "Textures\\sec\0ret.blp",
        "",
    ],
)
def test_escaping_paths_are_refused(tmp_path, path):
    root = tmp_path / "root"
    touch(root / "Textures" / "secret.blp")
    touch(tmp_path / "secret.blp")
    found, notes = TextureResolver([root], root / "Textures").resolve(path)
    assert found is None
    assert len(notes) == 1 and "refused" in notes[0].message


def test_symlinks_leaving_the_root_are_refused(tmp_path):
    root, outside = tmp_path / "root", tmp_path / "outside"
    touch(outside / "secret.blp", "secret")
    touch(root / "Textures" / "inside.blp", "inside")
    (root / "Textures" / "link.blp").symlink_to(outside / "secret.blp")
    (root / "Linked").symlink_to(outside, target_is_directory=True)
    (root / "Textures" / "alias.blp").symlink_to(root / "Textures" / "inside.blp")
    resolver = TextureResolver([root], tmp_path / "model")
    for path in ("Textures\\link.blp", "Linked\\secret.blp"):
        found, notes = resolver.resolve(path)
        assert found is None
        assert any("outside" in n.message and "refused" in n.message for n in notes)
    found, notes = resolver.resolve("Textures\\alias.blp")  # a link that stays inside is fine
    assert found == root / "Textures" / "alias.blp" and notes == []
    # A link in the model folder may point into an asset root (and the reverse).
    model_dir = tmp_path / "model"
    model_dir.mkdir()
    (model_dir / "skin.blp").symlink_to(root / "Textures" / "inside.blp")
    found, notes = TextureResolver([root], model_dir).resolve("skin.blp")
    assert found == model_dir / "skin.blp" and notes == []


@pytest.mark.corpus
def test_risk_loading_screen_needs_case_and_extension_fallback():
    mdx = corpus_path("Warcraft-3-Risk__wc3-risk-system/maps/risk_asia.w3x/Assets/Loading Screen/LoadingScreen.mdx")
    assert texs_paths(mdx.read_bytes()) == ["FullScreen.tga"]
    map_root = mdx.parents[2]
    found, notes = TextureResolver([map_root], mdx.parent).resolve("FullScreen.tga")
    assert found == mdx.parent / "Fullscreen.dds"
    assert "extension fallback to .dds" in notes[0].message
    assert decode_texture(found.read_bytes(), str(found)).shape == (1080, 1920, 4)


@pytest.mark.corpus
def test_nazarpunk_ghost_textures_resolve_by_case_insensitive_basename():
    mdx = corpus_path("nazarpunk__wc3-map-edemium-legacy/map/war3mapImported/Ghost.mdx")
    map_root = mdx.parents[1]
    paths = texs_paths(mdx.read_bytes())
    assert paths == ["GhostSkin.blp", "GHOST2.BLP", "WEAPON\\FLARE.BLP", "SHOCKWAVEWATER1.BLP", "BLACK32.BLP"]
    resolver = TextureResolver([map_root], mdx.parent)
    for path in paths:
        found, notes = resolver.resolve(path)
        assert found is not None and found.parent == map_root, (path, notes)
        assert found.name.lower() == path.split("\\")[-1].lower()
        assert decode_texture(found.read_bytes(), str(found)).ndim == 3
    assert "by basename" in resolver.resolve("WEAPON\\FLARE.BLP")[1][0].message
