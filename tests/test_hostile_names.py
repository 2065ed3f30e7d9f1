"""Hostile names in archives and models (issue 34, items 1-3), with real MPQ archives built by smpq.

- An entry name too long for the file system (250 bytes + `.mdx`) or for StormLib (past 1,024
  bytes) fails its own model, never the run, and is listed with its problem.
- Entries stored with `/` (`x/x/y.mdx`, `../../y/up.mdx`, `/abs/lead.mdx`) open by their stored
  name; their outputs stay inside -o.
- A name holding control characters reaches the terminal, the pages, summary.md, junit.xml and JSON
  escaped for each (farm.escape).
"""

from __future__ import annotations

import json
import os
import subprocess
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

os.environ.setdefault("EGL_PLATFORM", "surfaceless")
os.environ.setdefault("PYOPENGL_PLATFORM", "egl")

from mpq_build import build, have_tools  # noqa: E402

from farm.cli import main  # noqa: E402
from farm.escape import markdown, terminal, xml  # noqa: E402
from farm.plan.keys import trace_key_for  # noqa: E402
from farm.report.junit import junit_xml  # noqa: E402
from farm.run.jobs import run_job  # noqa: E402
from farm.settings import RenderSettings  # noqa: E402
from renderer.assets.mpq import MpqArchive  # noqa: E402
from renderer.samples import write_samples  # noqa: E402

needs_mpq = pytest.mark.skipif(have_tools() is not None, reason=str(have_tools()))

LONG = "a" * 250 + ".mdx"  # 254 bytes: one file name's most, and more than a path component with "X.w3x:"
TOO_LONG = "/".join(["d" * 100] * 11) + "/" + "e" * 99 + ".mdx"  # 1,214 bytes: past StormLib's MAX_PATH
SLASHED = ["x/x/y.mdx", "../../y/up.mdx", "/abs/lead.mdx"]
EVIL = "war3mapImported\\ev\x01\x1b[31mil.mdx"  # the audit's name: SOH, then a colour sequence
THUMBS = ["--size", "32", "--msaa", "0", "--workers", "1", "--no-progress", "--sheet", "0"]


@pytest.fixture(autouse=True)
def no_broker(monkeypatch):
    monkeypatch.delenv("FARM_BROKER_URL", raising=False)


def _archive(tmp_path: Path, renames: list[str], name: str = "X.w3x") -> Path:
    """A map archive holding crate.mdx and one copy of it under each name of `renames` (smpq -R)."""
    write_samples(tmp_path / "samples")
    crate = (tmp_path / "samples" / "crate.mdx").read_bytes()
    src = tmp_path / "src"
    src.mkdir()
    for i in range(len(renames) + 1):
        (src / f"m{i}.mdx").write_bytes(crate)
    dest = build(src, tmp_path / "in" / name)
    for i, new in enumerate(renames, 1):
        subprocess.run(["smpq", "-R", str(dest), f"m{i}.mdx", new], check=True, capture_output=True)
    return dest


def _entries(out: Path) -> dict[str, dict]:
    return {e["path"]: e for e in json.loads((out / "index.json").read_text("utf-8"))["models"]}


@needs_mpq
def test_long_entry_names_fail_their_own_model(tmp_path, capsys):
    archive = _archive(tmp_path, [LONG, TOO_LONG])
    out = tmp_path / "out"
    code = main(["thumbnails", str(archive), "-o", str(out), *THUMBS])
    printed = capsys.readouterr()
    assert code == 0, printed.err  # was: "error: ...: File name too long", rc 2
    entries = _entries(out)
    assert set(entries) == {"X.w3x:m0.mdx", f"X.w3x:{LONG}", f"X.w3x:{TOO_LONG}"}  # 1,214 bytes: listed
    assert entries[f"X.w3x:{LONG}"]["status"] == "done" and (out / entries[f"X.w3x:{LONG}"]["thumbnail"]).is_file()
    bad = entries[f"X.w3x:{TOO_LONG}"]
    assert bad["status"] == "failed" and bad["error"].endswith(
        "has a name of 1,214 bytes, longer than the 1,023 StormLib can open")
    assert "2 rendered, 0 up to date, 1 failed" in printed.out
    # inspect lists it with its problem, in text and JSON
    assert main(["inspect", str(archive)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert f"  {archive}:{TOO_LONG}  (cannot be opened: the entry has a name of 1,214 bytes, longer than the" \
           " 1,023 StormLib can open)" in lines
    assert f"  {archive}:{LONG}" in lines
    assert main(["inspect", str(archive), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert len(doc["models"]) == 3 and list(doc["problems"]) == [f"{archive}:{TOO_LONG}"]
    # farm run over the archive's models: the same, each model its own
    manifest = tmp_path / "job.toml"
    manifest.write_text(f'name = "long"\nsize = "16x16"\ntimestamps = [0]\nmodels = ["{archive}:**/*.mdx"]\n')
    job = run_job(manifest, out=tmp_path / "store", workers=1, broker="local", progress=False)
    status = {k.split("|")[0]: t["status"] for k, t in job.traces.items()}
    assert status == {"in/X.w3x:m0.mdx": "done", f"in/X.w3x:{LONG}": "done", f"in/X.w3x:{TOO_LONG}": "failed"}


@needs_mpq
def test_entries_stored_with_slashes_open_by_their_stored_name(tmp_path, capsys):
    archive = _archive(tmp_path, SLASHED)
    with MpqArchive(archive) as mpq:
        crate = mpq.read("m0.mdx")
        for name in SLASHED:  # as stored, as listed (no leading separator) and with backslashes
            listed = name.lstrip("/")
            assert mpq.has(name) and mpq.has(listed) and mpq.has(listed.replace("/", "\\")), name
            assert mpq.read(name) == mpq.read(listed) == mpq.read(listed.replace("/", "\\")) == crate
        assert not mpq.has("x/y/y.mdx")
    assert main(["inspect", f"{archive}:x/x/y.mdx"]) == 0, capsys.readouterr().err
    out = tmp_path / "o1" / "out"
    assert main(["thumbnails", str(archive), "-o", str(out), *THUMBS]) == 0, capsys.readouterr().err
    entries = _entries(out)
    assert set(entries) == {"X.w3x:m0.mdx", "X.w3x:x/x/y.mdx", "X.w3x:../../y/up.mdx", "X.w3x:abs/lead.mdx"}
    assert all(e["status"] == "done" for e in entries.values()), entries
    for e in entries.values():  # each its own thumbnail, inside -o
        assert (out / e["thumbnail"]).resolve().is_relative_to((out / "thumbs").resolve())
    assert len({e["thumbnail"] for e in entries.values()}) == 4
    assert {p.name for p in tmp_path.iterdir()} == {"samples", "src", "in", "o1"}
    assert {p.name for p in (tmp_path / "o1").iterdir()} == {"out"}


def test_each_medium_escapes_control_characters():
    name = "m\x00o\x01d\x1b[31m\x7f\x9b\u202e\udcff\nx"
    assert terminal(name) == "m\\x00o\\x01d\\x1b[31m\\x7f\\x9b\\u202e\\udcff\\x0ax"
    assert terminal("a\nb\tc\x1b", keep_lines=True) == "a\nb\tc\\x1b"
    assert terminal("Textures\\Crate.blp ünï") == "Textures\\Crate.blp ünï"  # ordinary names as they are
    assert markdown("<b>|x\x1b") == "&lt;b&gt;&#124;x&#92;x1b"  # shown as \x1b
    assert xml("a\x00b\x1b\ufffe\tc") == "a\\x00b\\x1b\\ufffe\tc"
    key = trace_key_for("models/x\x1b.mdx", "Bad\x01\x1bName", 0, RenderSettings())
    results = {"kind": "goldens", "job": "j", "traces": {key: {"key": key, "status": "fail", "reason": "r\x00",
                                                                "metrics": None}}}
    case = ET.fromstring(junit_xml(results)).find("./testsuite/testcase")
    assert case.get("name").startswith("Bad\\x01\\x1bName") and case.get("classname") == "models.x\\x1b_mdx"


@needs_mpq
def test_hostile_names_reach_terminal_and_pages_escaped(tmp_path, capsys):
    archive = _archive(tmp_path, [EVIL], name="evil.w3x")
    assert main(["inspect", str(archive)]) == 0
    out = capsys.readouterr().out
    assert "\x1b" not in out and "\x01" not in out
    assert f"  {archive}:war3mapImported/ev\\x01\\x1b[31mil.mdx\n" in out
    # A model whose texture path holds NUL and ESC: thumbnails' page, index.json, the warnings printed
    write_samples(tmp_path / "s2")
    assert main(["convert", str(tmp_path / "s2" / "crate.mdx"), str(tmp_path / "crate.mdl")]) == 0
    mdl = (tmp_path / "crate.mdl").read_text().replace("Textures\\Crate.tga", "Textures\\\x00\x1b[31mred\x01.blp")
    folder = tmp_path / "hostile"
    folder.mkdir()
    (folder / "evil\x1b[2J.mdl").write_text(mdl)
    capsys.readouterr()
    thumbs = tmp_path / "thumbs"
    assert main(["thumbnails", str(folder), "-o", str(thumbs), *THUMBS, "-v"]) == 0
    printed = capsys.readouterr()
    assert not any(c in printed.out + printed.err for c in "\x00\x01\x1b")
    page = (thumbs / "index.html").read_bytes()
    assert not any(c in page for c in b"\x00\x01\x1b")
    assert b"evil\\x1b[2J.mdl" in page and b"Textures\\\\x00\\x1b[31mred\\x01.blp" in page
    doc = json.loads((thumbs / "index.json").read_text("utf-8"))  # JSON carries the name itself
    (entry,) = doc["models"]
    assert entry["path"] == "evil\x1b[2J.mdl"
    assert b"\x1b" not in (thumbs / "index.json").read_bytes()
