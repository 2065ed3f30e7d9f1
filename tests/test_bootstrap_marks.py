"""Issue 24, item 2: a one-step bootstrap that works on real assets. A suite of sample models with
textures deleted and one model that draws nothing: the first run prints the bootstrap command with
the flags that approve such frames, in plain words; running it approves every rendered trace in one
go (one grouped line, no line per frame) and exits 0; those goldens stay marked (index, farm goldens,
every later report); the rerun passes; the texture put back makes its trace fail as changed; farm
approve without the flags still refuses such frames. Real EGL renders through the command line."""

from __future__ import annotations

import html as html_lib
import json
import os
import shlex
import shutil
from pathlib import Path

import pytest

os.environ.setdefault("EGL_PLATFORM", "surfaceless")
os.environ.setdefault("PYOPENGL_PLATFORM", "egl")

from golden_runs import image, key, make_run  # noqa: E402

from farm.cli import main  # noqa: E402
from farm.compare.runs import compare_run  # noqa: E402
from farm.goldens import GoldenError, GoldenIndex  # noqa: E402
from renderer.formats import load_model, save_model  # noqa: E402
from renderer.samples import write_samples  # noqa: E402

RUN = ("--out", "out", "--workers", "1", "--no-progress")
CRATE = "models/crate.mdx|Stand|0ms|auto|32x32|msaa0|team0|transparent"
EFFECTS = "models/effects.mdx|Stand|0ms|auto|32x32|msaa0|team0|transparent"
EMPTY = "models/empty.mdx|Stand|0ms|auto|32x32|msaa0|team0|transparent"
PLAIN = "models/filter_modes.mdx|Stand|0ms|auto|32x32|msaa0|team0|transparent"


@pytest.fixture
def suite(tmp_path, monkeypatch) -> Path:
    """models/: the samples with Textures\\Crate.tga and Textures\\Smoke.tga deleted (crate and
    effects draw placeholders) and empty.mdx (filter_modes squashed to a point: a blank frame)."""
    for name in ("FARM_GOLDENS", "FARM_OUT", "FARM_BROKER_URL"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("FARM_USER", "ci-bot")
    monkeypatch.chdir(tmp_path)
    write_samples(tmp_path / "samples")
    shutil.copytree(tmp_path / "samples", tmp_path / "models")
    for tex in ("Crate.tga", "Smoke.tga"):
        (tmp_path / "models" / "Textures" / tex).unlink()
    empty = load_model(tmp_path / "models" / "filter_modes.mdx")
    for g in empty.geosets:
        g.vertices = g.vertices * 0.0
    save_model(empty, tmp_path / "models" / "empty.mdx")
    (tmp_path / "job.toml").write_text('name = "s"\nsize = "32x32"\ntimestamps = [0]\nsequences = ["first"]\n'
                                       '[[models]]\npaths = ["models/*.mdx"]\n')
    return tmp_path


def farm(*args) -> int:
    return main([str(a) for a in args])


def _printed_command(out: str) -> list[str]:
    line = next(x for x in out.splitlines() if "farm run job.toml --update-goldens" in x)
    tail = line[line.index("farm run job.toml"):]
    words = shlex.split(tail.split(" (")[0])
    assert words[:2] == ["farm", "run"]
    return words[2:]


def _approved(goldens: Path, trace: str) -> dict:
    (record,) = GoldenIndex.load(goldens).entry(trace)["approved"]
    return record


def test_the_printed_bootstrap_approves_a_partly_textured_suite_and_the_marks_stay(suite, capsys):
    # 1. the first run (no goldens) prints the bootstrap, with the flags its frames need, in words
    assert farm("run", "job.toml", *RUN) == 0
    out = capsys.readouterr().out
    command = _printed_command(out)
    assert command == ["job.toml", "--update-goldens=new", "--allow-missing", "--allow-blank"], out
    assert "2 frames drew placeholders for missing assets and 1 frame came out blank" in out, out

    # 2. --update-goldens alone holds those frames back: one grouped line, the full list in a file
    assert farm("run", "job.toml", *RUN, "--update-goldens") == 1
    cap = capsys.readouterr()
    assert "skipped:" not in cap.err
    (held,) = [x for x in cap.err.splitlines() if "not approved" in x]
    assert "3 trace(s): 2 drew placeholders for missing assets" in held and "1 came out blank" in held, held
    assert "farm run job.toml --update-goldens=new --allow-missing --allow-blank" in held
    listing = Path(held.split("full list: ")[1].split(";")[0])
    assert sorted(r["trace"] for r in json.loads(listing.read_text())["not_approved"]) == [CRATE, EFFECTS, EMPTY]
    assert GoldenIndex.load(suite / "goldens").traces() == {PLAIN}

    # 3. the printed command: every rendered trace approved, one grouped line, exit 0
    assert farm("run", *command, *RUN) == 0
    cap = capsys.readouterr()
    assert "skipped:" not in cap.err and "not approved" not in cap.err
    grouped = [x for x in cap.out.splitlines() if "approved as drawn and marked" in x]
    assert len(grouped) == 1 and "3 trace(s): 2 drew placeholders for missing assets" in grouped[0], cap.out
    assert "Textures\\Crate.tga" in grouped[0] and "farm goldens --json" in grouped[0]
    assert "PASSED" in cap.out
    goldens = suite / "goldens"
    assert GoldenIndex.load(goldens).traces() == {CRATE, EFFECTS, EMPTY, PLAIN}
    assert _approved(goldens, CRATE)["missing"] == ["Textures\\Crate.tga"]
    assert _approved(goldens, EFFECTS)["missing"] == ["Textures\\Smoke.tga"]
    assert _approved(goldens, EMPTY)["blank"] == "fully transparent" and "missing" not in _approved(goldens, EMPTY)
    assert not {"missing", "blank"} & set(_approved(goldens, PLAIN))  # a frame drawn as meant: as before

    # 4. the rerun passes, and every view marks those goldens
    assert farm("run", "job.toml", *RUN, "-o", "report") == 0
    out = capsys.readouterr().out
    assert "PASSED" in out and "note: 3 trace(s) compared with goldens approved as drawn with placeholders" in out
    junit = (suite / "report" / "junit.xml").read_text()
    assert "golden drawn with placeholders: Textures\\Crate.tga missing" in junit
    assert "golden is a blank frame (fully transparent)" in junit
    html = (suite / "report" / "index.html").read_text()
    assert html.count("marked golden</span>") == 3 and "Textures\\Smoke.tga missing" in html
    assert "note: 3 trace(s) compared with goldens" in html_lib.unescape((suite / "report" / "summary.md").read_text())
    results = json.loads((suite / "report" / "results.json").read_text())
    assert results["traces"][CRATE]["golden_note"] == "golden drawn with placeholders: Textures\\Crate.tga missing"
    assert results["traces"][PLAIN]["golden_note"] is None
    assert farm("goldens", "--goldens", goldens, "--json") == 0
    listed = json.loads(capsys.readouterr().out)["marked"]
    assert [(m["trace"], m["missing"], m["blank"]) for m in listed] == [
        (CRATE, ["Textures\\Crate.tga"], None), (EFFECTS, ["Textures\\Smoke.tga"], None),
        (EMPTY, [], "fully transparent")]
    assert farm("goldens", "--goldens", goldens) == 0
    assert "3 approved image(s) marked: 2 drawn with placeholders for missing assets, 1 blank" in \
        capsys.readouterr().out

    # 5. the missing texture appears: that trace changes and fails, saying which asset it found
    shutil.copy(suite / "samples" / "Textures" / "Crate.tga", suite / "models" / "Textures" / "Crate.tga")
    assert farm("run", "job.toml", *RUN, "--json") == 1
    doc = json.loads(capsys.readouterr().out)["comparison"]
    assert {k: t["status"] for k, t in doc["traces"].items()} == {CRATE: "fail", EFFECTS: "pass", EMPTY: "pass",
                                                                   PLAIN: "pass"}
    assert "placeholders for Textures\\Crate.tga, which this frame found" in doc["traces"][CRATE]["reason"]

    # 6. farm approve keeps its guard: without the flags the frames with placeholders or blank stay out
    assert farm("approve", "latest", "--all", "--out", "out") == 0
    err = capsys.readouterr().err
    assert f"skipped: {EFFECTS}: the frame drew placeholders for missing assets (Textures\\Smoke.tga)" in err
    assert f"skipped: {EMPTY}: the frame is blank (fully transparent)" in err
    assert "missing" not in _approved(goldens, CRATE)  # the crate, now textured, approved unmarked


def test_old_index_lines_read_as_unmarked_and_marks_are_checked(tmp_path):
    """Compatibility: an index written before the marks (no "missing"/"blank") loads unchanged, its
    goldens unmarked; a line with marks round-trips byte for byte; a malformed mark is one sentence."""
    store, g = tmp_path / "store", tmp_path / "g"
    run = make_run(store, {key(t=0): image(1), key(t=500): image(2)})
    assert main(["approve", run.id, "--all", "--out", str(store), "--goldens", str(g)]) == 0
    text = (g / "index.jsonl").read_text()
    assert '"missing"' not in text and '"blank"' not in text  # nothing marked: the line is as before
    index = GoldenIndex.load(g)
    assert index.marked() == [] and index.text() == text
    results = compare_run(run, g, write=False)
    assert results["verdict"] == "pass" and all(t["golden_note"] is None for t in results["traces"].values())
    assert results["notes"] == []

    lines = text.splitlines()
    entry = json.loads(lines[1])
    entry["approved"][0]["blank"] = "one value (0, 0, 0, 255)"
    entry["approved"][0]["missing"] = ["Textures\\X.blp"]
    marked = "\n".join([lines[0], json.dumps(entry, ensure_ascii=False), *lines[2:]]) + "\n"
    (g / "index.jsonl").write_text(marked)
    index = GoldenIndex.load(g)
    (m,) = index.marked()
    assert m["missing"] == ["Textures\\X.blp"] and m["blank"] == "one value (0, 0, 0, 255)"
    assert '"gl": {' in index.text() and index.text().index('"missing"') > index.text().index('"gl"')
    assert GoldenIndex.load(g).text() == index.text()  # canonical: written again, the same bytes
    note = compare_run(run, g, write=False)["traces"][entry["trace"]]["golden_note"]
    assert note == "golden drawn with placeholders: Textures\\X.blp missing; golden is a blank frame (one value" \
                   " (0, 0, 0, 255))"

    entry["approved"][0]["missing"] = "Textures\\X.blp"
    (g / "index.jsonl").write_text("\n".join([lines[0], json.dumps(entry)]) + "\n")
    with pytest.raises(GoldenError, match=r"index.jsonl:2: approved\[0\]: 'missing' must be a list of asset names"):
        GoldenIndex.load(g)
