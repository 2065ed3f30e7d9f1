"""MPQ archives through StormLib: real archives built with smpq from the corpus map folders
(compressed, encrypted, without a listfile, with a map's 512-byte header), names and listing,
clear errors for bad files, and `ARCHIVE:ENTRY` model sources."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import CORPUS
from mpq_build import build, files_of, have_tools

from renderer.assets import MpqArchive, MpqError, list_models, open_archive, split_source
from renderer.assets.mpq import glob_to_regex
from renderer.errors import FormatError
from renderer.formats import load, load_model

pytestmark = pytest.mark.skipif(have_tools() is not None, reason=str(have_tools()))
MAP = CORPUS / "nazarpunk__wc3-map-edemium-legacy" / "map"
FORMS = {
    "compressed": {},
    "encrypted": {"encrypt": True},
    "no-listfile": {"listfile": False},
    "no-listfile-encrypted": {"listfile": False, "encrypt": True},
    "map-header": {"map_header": True, "encrypt": True},
}


@pytest.fixture(scope="module")
def archives(tmp_path_factory):
    if not MAP.is_dir():
        pytest.skip("corpus map folder not present")
    tmp = tmp_path_factory.mktemp("mpq")
    return {form: build(MAP, tmp / f"{form}.w3x", **kw) for form, kw in FORMS.items()}


@pytest.mark.parametrize("form", FORMS)
def test_every_file_reads_back_byte_for_byte(archives, form):
    with MpqArchive(archives[form]) as mpq:
        for name in files_of(MAP):
            assert mpq.read(name) == (MAP / name).read_bytes(), name
            assert mpq.has(name.upper().replace("/", "\\")) and mpq.has(name.lower())
        assert not mpq.has("war3mapImported\\Nope.mdx")
        with pytest.raises(MpqError, match=r"no-such\.blp'.*no such file"):
            mpq.read("no-such.blp")


def test_map_header_is_skipped_by_stormlib(archives):
    assert archives["map-header"].read_bytes()[:4] == b"HM3W"
    assert MpqArchive(archives["map-header"]).read("Jack3.mdx") == (MAP / "Jack3.mdx").read_bytes()


def test_listing_with_and_without_listfile(archives, tmp_path):
    names = MpqArchive(archives["compressed"]).names()
    assert names == sorted((n.replace("/", "\\") for n in files_of(MAP)), key=lambda n: (n.lower(), n))
    unlisted = MpqArchive(archives["no-listfile"])
    assert not unlisted.has_listfile()
    with pytest.raises(MpqError) as e:
        unlisted.names()
    assert str(e.value).startswith(str(archives["no-listfile"]) + ": ") and "--listfile FILE" in str(e.value)
    listfile = tmp_path / "listfile.txt"
    listfile.write_text("war3mapImported/Ghost.mdx\r\nJack3.mdx\nnot\\in\\it.blp\n")
    assert MpqArchive(archives["no-listfile"], listfile=listfile).names() == ["Jack3.mdx", "war3mapImported\\Ghost.mdx"]


def test_glob_over_entries(archives):
    mpq = MpqArchive(archives["encrypted"])
    assert mpq.glob("**/*.mdx") == ["Jack3.mdx", "war3mapImported\\ET_Barrel01.mdx", "war3mapImported\\Ghost.mdx",
                                    "war3mapImported\\Sweep_Fire_Large.mdx"]
    assert mpq.glob("*.MDX") == ["Jack3.mdx"]
    assert mpq.glob("JackTextures/*") == ["JackTextures\\HumanMaleHair.blp", "JackTextures\\JackSkin1.blp"]
    assert glob_to_regex("a/**/b?.blp").match("A\\x\\y\\B1.BLP")
    assert not glob_to_regex("*.blp").match("dir\\x.blp")
    assert glob_to_regex("war3mapImported/**").match("war3mapImported\\a\\b.mdx")
    assert mpq.glob("**") == mpq.names()


def test_bad_files_are_one_sentence_errors(archives, tmp_path):
    good = archives["compressed"].read_bytes()
    cases = {
        "missing.w3x": None,
        "text.mpq": b"hello, not an archive",
        "empty.w3x": b"",
        "truncated.w3x": good[: len(good) // 3],
        "header-only.w3x": good[:32],
    }
    for name, data in cases.items():
        path = tmp_path / name
        if data is not None:
            path.write_bytes(data)
        with pytest.raises(MpqError) as e:
            MpqArchive(path)
        message = str(e.value)
        assert message.startswith(f"{path}: ") and "\n" not in message, message
    with pytest.raises(MpqError, match="not a file"):
        MpqArchive(tmp_path)
    mpq = MpqArchive(archives["compressed"])
    mpq.close()
    mpq.close()  # twice is fine
    with pytest.raises(MpqError, match="closed"):
        mpq.read("Jack3.mdx")


def test_sources_split_load_and_list(archives):
    src = f"{archives['encrypted']}:war3mapImported/Ghost.mdx"
    assert split_source(src) == (archives["encrypted"], "war3mapImported/Ghost.mdx")
    assert split_source("maps/Foo.W3M:a\\b.mdl") == (Path("maps/Foo.W3M"), "a\\b.mdl")
    assert split_source("models/plain.mdx") is None
    assert split_source("C:\\models\\plain.mdx") is None
    model, context = load(src)
    assert model.path == src and context.location.archive == archives["encrypted"]
    assert context.location.entry == "war3mapImported\\Ghost.mdx"
    from renderer.frame import model_hash

    folder_model = load_model(MAP / "war3mapImported" / "Ghost.mdx")
    assert len(load_model(src).geosets) == len(folder_model.geosets)
    assert model_hash(model) == model_hash(folder_model)  # the entry's bytes, like the file's
    assert list_models(archives["compressed"]) == [f"{archives['compressed']}:{n}" for n in (
        "Jack3.mdx", "war3mapImported/ET_Barrel01.mdx", "war3mapImported/Ghost.mdx",
        "war3mapImported/Sweep_Fire_Large.mdx")]
    with pytest.raises(MpqError, match="--listfile"):
        list_models(archives["no-listfile"])
    with pytest.raises(FormatError, match="no such file"):
        load_model(f"{archives['compressed']}:war3mapImported/Missing.mdx")
    with pytest.raises(FormatError, match="unknown model format .extension '.blp'"):
        load_model(f"{archives['compressed']}:Black32.blp")


def test_open_archive_shares_handles(archives):
    assert open_archive(archives["compressed"]) is open_archive(str(archives["compressed"]))
