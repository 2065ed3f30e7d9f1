"""The asset search order (model folder, folders up to the map root or the stop root, asset roots
in order, game data patch first), today's path rules inside it, and the record of every lookup."""

from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np
import pytest
from mpq_build import build, have_tools

from renderer.assets import DecodeCache, GameDataError, ModelLocation, game_archives, order_archives
from renderer.assets.search import AssetSearch
from renderer.model import Model, Texture
from renderer.texture_set import TextureSettings, load_textures

needs_mpq = pytest.mark.skipif(have_tools() is not None, reason=str(have_tools()))


def touch(path: Path, text: str = "x") -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def search_from(model_dir: Path, *roots, game=None, stop_at=None) -> AssetSearch:
    return AssetSearch.for_model(ModelLocation(folder=model_dir), roots, game, stop_at)


def text(search: AssetSearch, asked: str) -> str | None:
    found = search.find(asked)
    return None if found is None else found.data.decode()


@pytest.mark.parametrize("marker", ["war3map.w3i", "WAR3MAPIMPORTED/", "war3map.j"])
def test_map_root_by_marker_entry(tmp_path, marker):
    map_dir = tmp_path / "jobs" / "mymap"
    touch(map_dir / marker.rstrip("/") / "x") if marker.endswith("/") else touch(map_dir / marker)
    model_dir = map_dir / "war3mapImported" / "units"
    touch(map_dir / "Textures" / "Skin.blp", "map level")
    touch(tmp_path / "jobs" / "Other.blp", "above the map")
    s = search_from(model_dir)
    assert text(s, "Textures\\Skin.blp") == "map level"
    assert text(s, "Other.blp") is None  # the search stops at the map root
    looked = s.missing()[0]["looked"]
    assert looked == [str(model_dir), str(model_dir.parent), str(map_dir)]


def test_map_root_by_folder_name_any_case(tmp_path):
    map_dir = tmp_path / "Maps" / "Foo.W3X"
    touch(map_dir / "Skin.blp", "map")
    touch(tmp_path / "Maps" / "Outside.blp")
    s = search_from(map_dir / "Models" / "Hero")
    assert text(s, "Models\\Hero\\..\\x.blp") is None  # refused, not looked up
    assert text(s, "skin.BLP") == "map"
    assert text(s, "Outside.blp") is None


def test_no_map_root_stop_at_the_given_root(tmp_path):
    root = tmp_path / "assets"
    model_dir = root / "units" / "footman"
    touch(root / "Textures" / "Shared.blp", "root")
    touch(root / "units" / "Mid.blp", "mid")
    touch(tmp_path / "Above.blp")
    assert text(search_from(model_dir), "Textures\\Shared.blp") is None  # no stop root: the model's folder only
    s = search_from(model_dir, stop_at=root)
    assert text(s, "Textures\\Shared.blp") == "root"
    assert text(s, "Mid.blp") == "mid"
    assert text(s, "Above.blp") is None
    # A stop root that does not hold the model is ignored.
    assert text(search_from(model_dir, stop_at=tmp_path / "elsewhere"), "Textures\\Shared.blp") is None


def test_nearest_folder_first_then_upwards_then_roots_in_order(tmp_path):
    map_dir = tmp_path / "m.w3m"
    model_dir = map_dir / "a" / "b"
    first, second = tmp_path / "first", tmp_path / "second"
    for d, label in ((model_dir, "model"), (map_dir / "a", "a"), (map_dir, "map"), (first, "first"),
                     (second, "second")):
        touch(d / "Textures" / "All.blp", label)
    touch(first / "Textures" / "Roots.blp", "first")
    touch(second / "Textures" / "Roots.blp", "second")
    touch(second / "Textures" / "OnlySecond.blp", "second")
    touch(map_dir / "a" / "Textures" / "Up.blp", "a")
    touch(map_dir / "Textures" / "Up.blp", "map")
    s = search_from(model_dir, first, second)
    assert text(s, "Textures\\All.blp") == "model"
    assert text(s, "textures/up.blp") == "a"
    assert text(s, "Textures\\Roots.blp") == "first"
    assert text(search_from(model_dir, second, first), "Textures\\Roots.blp") == "second"
    assert text(s, "Textures\\OnlySecond.blp") == "second"


def test_rules_kept_basename_extension_fallback_and_escapes(tmp_path):
    map_dir = tmp_path / "x.w3x"
    touch(map_dir / "Local.blp", "local")
    touch(map_dir / "ReplaceableTextures" / "TeamColor" / "TeamColor00.dds", "dds")
    outside = touch(tmp_path / "secret.blp", "secret")
    (map_dir / "Link.blp").symlink_to(outside)
    s = search_from(map_dir)
    found = s.find("war3mapImported\\LOCAL.BLP")
    assert found.data == b"local" and found.how == "basename"
    found = s.find("ReplaceableTextures\\TeamColor\\TeamColor00.blp")
    assert found.data == b"dds" and found.how == "exact, extension fallback to .dds"
    assert s.find("Link.blp") is None
    assert "outside the searched folders" in s.missing()[-1]["notes"][0]
    for bad in ("C:\\x.blp", "\\\\server\\x.blp", "/etc/passwd", "a\\..\\x.blp", "a:b.blp", ""):
        assert s.find(bad) is None
        assert s.record[-1]["why"].startswith("refused")


def test_record_found_and_missing(tmp_path):
    map_dir = tmp_path / "x.w3x"
    data = b"texture bytes"
    (map_dir / "Textures").mkdir(parents=True)
    (map_dir / "Textures" / "A.blp").write_bytes(data)
    s = search_from(map_dir)
    s.find("Textures\\A.blp")
    s.find("Textures\\A.blp")  # asked twice, recorded once
    s.find("Textures\\Gone.blp")
    assert s.record[0] == {"kind": "texture", "asked": "Textures\\A.blp", "found": str(map_dir / "Textures" / "A.blp"),
                           "sha256": hashlib.sha256(data).hexdigest(), "how": "exact"}
    miss = s.record[1]
    assert miss["missing"] and miss["asked"] == "Textures\\Gone.blp" and miss["looked"] == [str(map_dir)]
    assert "extensions tried: .blp, .dds, .tga" in miss["why"]
    assert len(s.record) == 2


def test_one_diagnostic_per_missing_texture_per_model(tmp_path):
    model = Model(textures=[Texture(path="Textures\\Gone.blp"), Texture(path="Textures\\Gone.blp"),
                            Texture(path="Textures\\Other.blp")], path=str(tmp_path / "m.mdx"))
    texset = load_textures(model)
    messages = [d.message for d in texset.diagnostics]
    assert len(messages) == 2, messages
    assert "'Textures\\\\Gone.blp' not found" in messages[0] and "looked in 1 place(s)" in messages[0]
    assert [t.source for t in texset.textures] == ["missing"] * 3
    assert [e["asked"] for e in texset.search.missing()] == ["Textures\\Gone.blp", "Textures\\Other.blp"]


def test_game_folder_order_and_errors(tmp_path):
    game = tmp_path / "Warcraft III"
    for name in ("war3.mpq", "WAR3X.MPQ", "War3xlocal.mpq", "War3Patch.mpq"):
        touch(game / name)
    assert [p.name for p in game_archives(game)] == ["War3Patch.mpq", "War3xlocal.mpq", "WAR3X.MPQ", "war3.mpq"]
    assert [p.name for p in order_archives([game / "war3.mpq", tmp_path / "mod.mpq", game / "War3Patch.mpq"])] == [
        "mod.mpq", "War3Patch.mpq", "war3.mpq"]
    casc = tmp_path / "Reforged"
    (casc / "Data").mkdir(parents=True)
    touch(casc / ".build.info")
    with pytest.raises(GameDataError, match="Reforged .CASC.*extract"):
        game_archives(casc)
    s = search_from(tmp_path / "m.w3x", game=casc)  # an error sentence for the frame, not a crash
    assert not s.has_game and len(s.errors) == 1 and "Reforged (CASC)" in s.errors[0]
    with pytest.raises(GameDataError, match="no game archives"):
        game_archives(tmp_path)


@needs_mpq
def test_archives_as_asset_roots_and_game_patch_first(tmp_path):
    base, patch, root = tmp_path / "base", tmp_path / "patch", tmp_path / "root"
    touch(base / "Textures" / "Both.blp", "base")
    touch(base / "Textures" / "BaseOnly.blp", "base only")
    touch(patch / "Textures" / "Both.blp", "patch")
    touch(root / "Textures" / "Both.blp", "asset root")
    game = tmp_path / "game"
    build(base, game / "war3.mpq")
    build(patch, game / "War3Patch.mpq")
    model_dir = tmp_path / "m.w3x"
    model_dir.mkdir()
    s = search_from(model_dir, game=game)
    assert text(s, "textures/both.BLP") == "patch"
    assert s.record[-1]["found"] == f"{game / 'War3Patch.mpq'}:Textures\\Both.blp"
    assert text(s, "Textures\\BaseOnly.blp") == "base only"
    # Archives given together are searched patch first, whatever order they come in.
    assert text(search_from(model_dir, game=[game / "war3.mpq", game / "War3Patch.mpq"]), "Textures\\Both.blp") == (
        "patch")
    # Asset roots (a folder, an archive) before game data.
    assert text(search_from(model_dir, root, game=game), "Textures\\Both.blp") == "asset root"
    assert text(search_from(model_dir, game / "war3.mpq", game=game), "Textures\\Both.blp") == "base"
    # A bad asset root is one error sentence, never a crash.
    junk = touch(tmp_path / "junk.mpq", "not an archive")
    s = search_from(model_dir, junk)
    assert len(s.errors) == 1 and str(junk) in s.errors[0] and "cannot be opened as an MPQ archive" in s.errors[0]


@needs_mpq
def test_team_colour_from_game_data_else_builtin(tmp_path):
    from renderer.formats.textures import team_color_texture
    from renderer.texture_set import TEAM_TEXTURES

    blp = Path(__file__).resolve().parents[2] / "shared" / "corpus" / "nazarpunk__wc3-map-edemium-legacy" / "map"
    if not (blp / "Black32.blp").is_file():
        pytest.skip("corpus texture not present")
    data = tmp_path / "data"
    target = data / TEAM_TEXTURES[1][1].format(3).replace("\\", "/")
    target.parent.mkdir(parents=True)
    target.write_bytes((blp / "Black32.blp").read_bytes())
    game = build(data, tmp_path / "game" / "war3.mpq")
    model = Model(textures=[Texture(replaceable_id=1), Texture(replaceable_id=2)], path=str(tmp_path / "x.mdx"))
    with_game = load_textures(model, TextureSettings(team=3, game=(game,)))
    assert with_game.textures[0].source == f"{game}:ReplaceableTextures\\TeamColor\\TeamColor03.blp"
    assert with_game.textures[0].rgba.shape[:2] != (1, 1)
    assert with_game.textures[1].source == "team-glow:3"  # not in that game data: the built-in glow
    assert not with_game.diagnostics  # a built-in fallback is no missing texture
    assert [e["kind"] for e in with_game.search.missing()] == ["team-glow"]  # but the lookup is recorded
    builtin = load_textures(model, TextureSettings(team=3))
    assert builtin.textures[0].source == "team-color:3"
    assert np.array_equal(builtin.textures[0].rgba, team_color_texture(3))


def test_decode_cache_keyed_by_digest_and_bounded():
    calls = []

    def decode(data, name):
        calls.append(name)
        return np.zeros((4, 4, 4), np.uint8)  # 64 bytes

    cache = DecodeCache(max_bytes=128)
    a = cache.get("d1", b"x", "first/place.blp", decode)
    assert cache.get("d1", b"x", "elsewhere.blp", decode) is a and calls == ["first/place.blp"]
    assert not a.flags.writeable
    cache.get("d2", b"y", "two", decode)
    cache.get("d3", b"z", "three", decode)  # over 128 bytes: d1 (least recently used) goes
    assert len(cache) == 2 and cache.size_bytes == 128
    cache.get("d1", b"x", "again", decode)
    assert calls[-1] == "again"


def test_halo_bitmaps_come_from_the_loader_and_are_recorded():
    from conftest import CORPUS

    from renderer.formats import load

    path = CORPUS / "aLTis94__Halo-CE-Monaco" / "tags" / "characters" / "cyborg" / "cyborg.gbxmodel"
    if not path.is_file():
        candidates = sorted(CORPUS.rglob("cyborg.gbxmodel"))
        if not candidates:
            pytest.skip("Halo corpus not present")
        path = candidates[0]
    model, context = load(path)  # the bitmaps it found are its context's texture source
    texset = load_textures(model, context=context)
    assert texset.textures[0].rgba.shape == (512, 512, 4)
    bitmaps = [e for e in texset.search.record if e["kind"] == "halo bitmap"]
    assert [e["asked"] for e in bitmaps] == ["characters\\cyborg\\bitmaps\\cyborg.bitmap"]
    assert bitmaps[0]["sha256"] == hashlib.sha256(Path(bitmaps[0]["found"]).read_bytes()).hexdigest()
    shaders = [e for e in texset.search.record if e["kind"] == "halo shader"]
    assert len(shaders) == 4 and all("sha256" in e for e in shaders)


def test_models_sharing_a_texture_decode_it_once(tmp_path):
    from PIL import Image

    from renderer.assets import DECODED

    img = np.zeros((8, 8, 4), np.uint8)
    img[..., 0] = np.arange(8)  # unlikely to be cached by another test
    img[..., 3] = 255
    models = []
    for i in range(3):
        d = tmp_path / f"map{i}.w3x" / "Textures"
        d.mkdir(parents=True)
        Image.fromarray(img, "RGBA").save(d / "Shared.tga")
        models.append(Model(textures=[Texture(path="Textures\\Shared.tga")], path=str(d.parent / "m.mdx")))
    misses = DECODED.misses
    loaded = [load_textures(m).textures[0] for m in models]
    assert DECODED.misses - misses == 1
    assert loaded[0].rgba is loaded[1].rgba is loaded[2].rgba
    assert len({t.source for t in loaded}) == 3  # found in three places, decoded once
