"""`farm thumbnails`: finding models, sequence choice, the corpus (failures as placeholder tiles),
index.json and index.html, contact sheets, incremental runs, and resuming a run that was killed."""

from __future__ import annotations

import hashlib
import html.parser
import json
import math
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

os.environ.setdefault("EGL_PLATFORM", "surfaceless")
os.environ.setdefault("PYOPENGL_PLATFORM", "egl")

from conftest import CORPUS  # noqa: E402
from mdx_cases import REJECTED  # noqa: E402

from farm.cli import main  # noqa: E402
from farm.look import default_time  # noqa: E402
from farm.thumbs import ThumbnailError, ThumbnailOptions, make_thumbnails  # noqa: E402
from farm.thumbs.find import EXTENSIONS, asset_roots_for, find_models  # noqa: E402
from farm.thumbs.index import ENTRY_KEYS  # noqa: E402
from farm.thumbs.work import choose_sequence  # noqa: E402
from renderer.model import Model, Sequence  # noqa: E402
from renderer.png import read_png  # noqa: E402
from renderer.samples import write_samples  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
BROKEN_MDX = b"MDLXVERS\x04\x00\x00\x00\x20\x03\x00\x00GEOS\xe8\x03\x00\x00" + bytes(8)
EVIL_SEQ = '<script>alert("seq")</script> & \'x\''
EVIL_FILE = "odd <b>&\"'#%.MDX"
# Corpus models no loader accepts: the MDX ones of tests/mdx_cases.REJECTED and their MDL twins.
CORPUS_FAILED = {**REJECTED,
                 "stijnherfst__HiveWE/tests/fixtures/mdl/matrix_skinning_v800.mdl": "Groups names node 9",
                 "zengfanfan__war3mdlx/test/all.mdl": "face index 1 is vertex 1, past the 1 vertices"}


@pytest.fixture(autouse=True)
def no_broker(monkeypatch):
    monkeypatch.delenv("FARM_BROKER_URL", raising=False)


def _crate_with(sequences, path: Path) -> Path:
    from renderer.formats.mdx import save_mdx
    from renderer.samples.build import crate

    model, _ = crate()
    model.sequences = [Sequence(name=n, interval=iv, flags=0) for n, iv in sequences]
    path.parent.mkdir(parents=True, exist_ok=True)
    save_mdx(model, path)
    return path


@pytest.fixture
def models(tmp_path: Path) -> Path:
    """The sample models, one with a Portrait, one with an odd name and sequence, one broken, one text file."""
    root = tmp_path / "models"
    write_samples(root)
    _crate_with([("Walk", (0, 1000)), ("Portrait", (2000, 2600)), ("Stand", (3000, 4000))], root / "portrait.mdx")
    _crate_with([(EVIL_SEQ, (0, 800))], root / "sub" / EVIL_FILE)
    (root / "broken.mdx").write_bytes(BROKEN_MDX)
    (root / "notes.txt").write_text("not a model")
    return root


def index_of(out: Path) -> dict:
    return json.loads((out / "index.json").read_text("utf-8"))


def entries(out: Path) -> dict[str, dict]:
    return {e["id"]: e for e in index_of(out)["models"]}


# --- no GL


def _model(*names) -> Model:
    return Model(sequences=[Sequence(name=n, interval=(1000 * i, 1000 * i + 600)) for i, n in enumerate(names)])


def test_sequence_choice_rules():
    m = _model("Walk", "Stand 2", "Portrait", "Stand 1")
    assert choose_sequence(m, None) == (2, "portrait")  # nothing asked: Portrait first
    assert choose_sequence(m, "walk") == (0, "asked")  # asked, case-insensitive
    assert choose_sequence(m, "Attack") == (3, "stand")  # asked but missing: Stand (lowest number), not Portrait
    assert choose_sequence(_model("Walk", "stand"), None) == (1, "stand")
    assert choose_sequence(_model("Walk", "Attack"), None) == (0, "first")
    assert choose_sequence(_model("Walk", "Attack"), "Death") == (0, "first")
    assert choose_sequence(Model(), None) == (None, "none")
    assert choose_sequence(Model(), "Stand") == (None, "none")
    # time: the middle of the sequence chosen, from its start; 0 without a sequence
    assert default_time(m, 2) == 300 and default_time(Model(), None) == 0


def test_find_models_order_ids_and_asset_roots(tmp_path):
    a, b = tmp_path / "a" / "maps", tmp_path / "b" / "maps"
    for rel in ("z.mdx", "Y.MDL", "sub/x.Model", "sub/deep/w.GBXMODEL", "sub/not.mdx.txt", "B.mdx"):
        (a / rel).parent.mkdir(parents=True, exist_ok=True)
        (a / rel).write_bytes(b"x")
    (b / "q.mdx").parent.mkdir(parents=True)
    (b / "q.mdx").write_bytes(b"x")
    out = a / "thumbs"
    (out / "thumbs").mkdir(parents=True)
    (out / "thumbs" / "old.mdx").write_bytes(b"x")  # inside the output folder: never a model
    found = find_models([a, b, a / "sub"], exclude=[out])
    la, lb = (f"maps~{hashlib.sha256(str(r).encode()).hexdigest()[:8]}" for r in (a, b))  # one name: path hashes
    assert [f.id for f in found] == [f"{la}/B.mdx", f"{la}/Y.MDL", f"{la}/sub/deep/w.GBXMODEL", f"{la}/sub/x.Model",
                                     f"{la}/z.mdx", f"{lb}/q.mdx"]  # a/sub overlaps a: nothing twice
    assert {Path(f.rel).suffix.lower() for f in found} <= set(EXTENSIONS)
    # the ids do not depend on the order of the roots
    assert {f.id for f in find_models([b, a], exclude=[out])} == {f.id for f in found}
    assert [f.id for f in find_models([b], exclude=[out])] == ["maps/q.mdx"]  # a name alone: kept as it is
    named = find_models([a / "sub", b], names=["units", "props"])
    assert [f.id for f in named] == ["units/deep/w.GBXMODEL", "units/x.Model", "props/q.mdx"]
    for bad in (["one"], ["x", "x"], ["a/b", "c"]):
        with pytest.raises(ValueError, match="--name"):
            find_models([a, b], names=bad)
    w = found[2]
    assert asset_roots_for(w, [a, b], [tmp_path]) == [str(a / "sub"), str(a), str(b), str(tmp_path)]
    with pytest.raises(ValueError, match="no such folder"):
        find_models([tmp_path / "nope"])


# --- the corpus: every model, failures with their errors


@pytest.fixture(scope="module")
def corpus_run(tmp_path_factory):
    if not CORPUS.is_dir():
        pytest.skip("../shared/corpus is not present")
    out = tmp_path_factory.mktemp("corpus-thumbs")
    summary = make_thumbnails([CORPUS], out, ThumbnailOptions(size=96, sheet=64), workers=2, progress=False)
    return out, summary


def test_corpus_thumbnails_and_placeholders(corpus_run):
    out, summary = corpus_run
    files = sorted(p for p in CORPUS.rglob("*") if p.is_file() and p.suffix.lower() in EXTENSIONS)
    index = index_of(out)
    assert [e["path"] for e in index["models"]] == sorted(str(p.relative_to(CORPUS).as_posix()) for p in files)
    assert summary.models == len(files) == len(summary.rendered) and summary.skipped == 0
    failed = {e["path"]: e for e in index["models"] if e["status"] != "done"}
    assert set(failed) == set(CORPUS_FAILED)
    for rel, e in failed.items():
        assert CORPUS_FAILED[rel] in e["error"] and e["thumbnail"] is None and e["sheet"]
        assert summary.failed[e["id"]] == e["error"]
    halo = [e for e in index["models"] if e["path"].endswith((".gbxmodel", ".model"))]
    assert len(halo) >= 20 and all(e["status"] == "done" and e["vertices"] > 0 for e in halo)
    assert all(e["sequence"] is None and e["sequence_rule"] == "none" and e["time_ms"] == 0 for e in halo)
    for e in index["models"]:
        assert tuple(sorted(e)) == tuple(sorted(ENTRY_KEYS))
        if e["status"] != "done":
            continue
        rgba, trace = read_png(out / e["thumbnail"])
        assert rgba.shape == (96, 96, 4)
        # the default look's fit camera (farm.look); auto only where nothing is drawn (then the entry says blank)
        source = trace["camera"]["source"]
        assert trace["model_hash"] == e["sha256"]
        assert source == "fit:drawn" or (e["blank"] and source.startswith("auto:"))
        assert trace["camera"]["source"] == e["camera_source"] and trace["time_ms"] == e["time_ms"]
        assert trace["sequence"] == e["sequence"]
    jack = next(e for e in index["models"] if e["file"] == "Jack3.mdx")  # has Portrait: shown at its middle
    assert (jack["sequence"], jack["sequence_rule"], jack["time_ms"]) == ("Portrait", "portrait", 1350)
    assert jack["vertices"] == 736 and jack["triangles"] == 844
    # Contact sheets: one per 64 models; the placeholder tiles are there (their dark red)
    assert index["sheets"] == [f"sheets/sheet-{i + 1:04d}.png" for i in range(math.ceil(len(files) / 64))]
    sheet = np.asarray(__import__("PIL.Image").Image.open(out / index["sheets"][0]).convert("RGBA"))
    assert (sheet == (96, 24, 24, 255)).all(axis=2).sum() > 1000


def test_corpus_rerun_renders_nothing(corpus_run):
    out, first = corpus_run
    before = (out / "index.json").read_bytes()
    sheet_mtime = (out / "sheets" / "sheet-0001.png").stat().st_mtime_ns
    again = make_thumbnails([CORPUS], out, ThumbnailOptions(size=96, sheet=64), workers=2, progress=False)
    # every corpus failure is the model's own (cause "model"): unchanged, none is tried again
    assert again.rendered == [] and again.kept_failed == len(first.failed) and not again.outside
    assert again.skipped == first.models - len(first.failed) and again.failed == first.failed
    assert (out / "index.json").read_bytes() == before  # no times in it: the same bytes
    assert again.sheets_written == 0 and (out / "sheets" / "sheet-0001.png").stat().st_mtime_ns == sheet_mtime
    assert not (out / ".farm" / "journal.jsonl").exists() and not (out / ".farm" / "jobs").exists()


# --- sample models: index, escaping, sheets, incremental runs, formats


class _Page(html.parser.HTMLParser):
    def __init__(self):
        super().__init__()
        self.tiles, self.imgs, self.scripts = [], [], 0

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "figure":
            self.tiles.append(a)
        elif tag == "img":
            self.imgs.append(a["src"])
        elif tag == "script":
            self.scripts += 1


def test_index_json_and_html_escape_every_string(models, tmp_path, capsys):
    out = tmp_path / "out"
    assert main(["thumbnails", str(models), "--out", str(out), "--size", "64", "--sheet", "2", "--workers", "2",
                 "--no-progress"]) == 0  # a failed model is not an error without --strict
    printed = capsys.readouterr().out
    assert "6 models: 5 rendered, 0 up to date, 1 failed" in printed and "models/broken.mdx: " in printed
    index = index_of(out)
    assert set(index) == {"format", "options", "counts", "sheets", "models"}
    assert index["counts"] == {"models": 6, "done": 5, "failed": 1}
    by_file = {e["file"]: e for e in index["models"]}
    assert [e["id"] for e in index["models"]] == [
        "models/broken.mdx", "models/crate.mdx", "models/effects.mdx", "models/filter_modes.mdx",
        "models/portrait.mdx", f"models/sub/{EVIL_FILE}"]
    assert by_file["portrait.mdx"]["sequence"] == "Portrait" and by_file["portrait.mdx"]["time_ms"] == 300
    assert by_file["crate.mdx"]["sequence_rule"] == "stand" and by_file["crate.mdx"]["time_ms"] == 1000
    evil = by_file[EVIL_FILE]
    assert evil["sequence"] == EVIL_SEQ and evil["sequence_rule"] == "first"
    assert evil["thumbnail"] == f"thumbs/models/sub/{EVIL_FILE}.png" and (out / evil["thumbnail"]).is_file()
    assert by_file["crate.mdx"]["vertices"] > 0 and by_file["crate.mdx"]["triangles"] > 0
    assert "chunk GEOS at byte 20" in by_file["broken.mdx"]["error"]
    # Contact sheets: 2 models each
    assert index["sheets"] == ["sheets/sheet-0001.png", "sheets/sheet-0002.png", "sheets/sheet-0003.png"]
    assert all((out / s).is_file() for s in index["sheets"]) and by_file[EVIL_FILE]["sheet"] == index["sheets"][2]

    page = (out / "index.html").read_text("utf-8")
    assert "<script>alert" not in page and "&lt;script&gt;alert(&#34;seq&#34;)&lt;/script&gt;" in page
    assert "odd <b>" not in page and "odd &lt;b&gt;&amp;&#34;&#39;#%.MDX" in page
    p = _Page()
    p.feed(page)
    assert p.scripts == 1 and len(p.tiles) == 6 and sum("failed" in t["class"] for t in p.tiles) == 1
    search = [t["data-search"] for t in p.tiles]
    assert any(EVIL_SEQ.lower() in s and EVIL_FILE.lower() in s for s in search)
    assert any("chunk geos at byte 20" in s for s in search)
    evil_src = next(s for s in p.imgs if "odd" in s)
    assert evil_src.startswith("thumbs/models/sub/odd%20%3Cb%3E%26%22%27%23%25.MDX.png?v=")
    from urllib.parse import unquote

    assert (out / unquote(evil_src.split("?")[0])).is_file()


def test_sheets_drawn_during_the_run_equal_sheets_drawn_from_the_final_index(models, tmp_path):
    """Sheets are drawn while the pool renders, as soon as their models are done (in threads); each
    one's bytes equal a sheet drawn afterwards from the index's final entries, and a second run
    with nothing changed draws none."""
    from farm.thumbs.sheets import draw_sheet, sheet_bytes

    out = tmp_path / "out"
    first = make_thumbnails([models], out, ThumbnailOptions(size=48, sheet=2), workers=2, progress=False)
    index = index_of(out)
    assert first.sheets_written == len(index["sheets"]) == 3
    for k, name in enumerate(index["sheets"]):
        entries = [e for e in index["models"] if e["sheet"] == name]
        assert entries == index["models"][2 * k:2 * k + 2]
        assert (out / name).read_bytes() == sheet_bytes(draw_sheet(entries, out, 2, 48), "png")
    again = make_thumbnails([models], out, ThumbnailOptions(size=48, sheet=2), workers=2, progress=False)
    assert again.sheets_written == 0 and again.skipped == first.models - len(first.failed)


def test_incremental_runs(models, tmp_path):
    out = tmp_path / "out"
    opts = ThumbnailOptions(size=48, sheet=4)
    first = make_thumbnails([models], out, opts, workers=1, progress=False)
    assert len(first.rendered) == 6 and list(first.failed) == ["models/broken.mdx"]
    crate = (out / "thumbs/models/crate.mdx.png").read_bytes()
    broken = entries(out)["models/broken.mdx"]
    assert broken["cause"] == "model" and broken["sha256"] and entries(out)["models/crate.mdx"]["cause"] is None
    # Nothing changed: nothing renders, not even the model that failed (it would fail the same way);
    # the index keeps its failure, and --retry-failed tries it again.
    second = make_thumbnails([models], out, opts, workers=1, progress=False)
    assert second.rendered == [] and second.kept_failed == 1 and list(second.failed) == ["models/broken.mdx"]
    assert entries(out)["models/broken.mdx"] == broken and not second.outside
    assert "1 failed, 1 of them unchanged since they failed (--retry-failed)" in second.text()
    retried = make_thumbnails([models], out, opts, workers=1, progress=False, retry_failed=True)
    assert retried.rendered == ["models/broken.mdx"] and retried.kept_failed == 0
    # The broken model is fixed and another one edited: only those two render.
    shutil.copy(models / "crate.mdx", models / "broken.mdx")
    shutil.copy(models / "filter_modes.mdx", models / "effects.mdx")
    third = make_thumbnails([models], out, opts, workers=1, progress=False)
    assert sorted(third.rendered) == ["models/broken.mdx", "models/effects.mdx"] and not third.failed
    assert (out / "thumbs/models/broken.mdx.png").is_file()
    # A model removed: its thumbnail goes; the others stay as they were.
    (models / "sub" / EVIL_FILE).unlink()
    fourth = make_thumbnails([models], out, opts, workers=1, progress=False)
    assert fourth.rendered == [] and fourth.models == 5 and not (out / "thumbs/models/sub").exists()
    assert (out / "thumbs/models/crate.mdx.png").read_bytes() == crate
    assert len(index_of(out)["sheets"]) == 2 and not (out / "sheets/sheet-0003.png").exists()
    # Other options: everything renders again; webp replaces png, each with its trace in a sidecar.
    webp = make_thumbnails([models], out, ThumbnailOptions(size=48, sheet=4, format="webp", sequence="SPIN"),
                           workers=1, progress=False)
    assert len(webp.rendered) == 5 and not list((out / "thumbs").rglob("*.png"))
    e = entries(out)["models/crate.mdx"]
    assert (e["sequence"], e["sequence_rule"], e["time_ms"]) == ("Spin", "asked", 1000)
    assert entries(out)["models/portrait.mdx"]["sequence_rule"] == "stand"  # no Spin there; Portrait only by default
    assert e["thumbnail"] == "thumbs/models/crate.mdx.webp" and e["sidecar"] == "thumbs/models/crate.mdx.webp.json"
    from PIL import Image

    with Image.open(out / e["thumbnail"]) as im:
        assert im.format == "WEBP" and im.size == (48, 48)
    side = json.loads((out / e["sidecar"]).read_text())
    assert side["trace"]["model_hash"] == e["sha256"] and side["trace"]["size"] == [48, 48]
    assert index_of(out)["sheets"] == ["sheets/sheet-0001.webp", "sheets/sheet-0002.webp"]
    assert not list((out / "sheets").glob("*.png"))
    # --force renders what is up to date; --strict makes a failure an exit status.
    assert len(make_thumbnails([models], out, ThumbnailOptions(size=48, sheet=4, format="webp", sequence="SPIN"),
                               workers=1, progress=False, force=True).rendered) == 5


def test_cli_errors_and_strict(models, tmp_path, capsys):
    out = tmp_path / "out"
    assert main(["thumbnails", str(tmp_path / "nope"), "--out", str(out)]) == 2
    assert "nope: no such folder" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["thumbnails", str(models), "--out", str(out), "--size", "9000"])
    assert "9000x9000 is outside 1..8192" in capsys.readouterr().err  # farm.settings' one size rule
    with pytest.raises(ThumbnailError, match="--size 0x0 is outside 1..8192"):
        make_thumbnails([models], out, ThumbnailOptions(size=0))
    only_broken = tmp_path / "only"
    only_broken.mkdir()
    shutil.copy(models / "broken.mdx", only_broken / "broken.mdx")
    assert main(["thumbnails", str(only_broken), "--out", str(out), "--strict", "--no-progress",
                 "--workers", "1"]) == 1
    assert "1 failed" in capsys.readouterr().out
    # One run at a time per folder.
    from farm.thumbs.state import ThumbState

    held = ThumbState(out / ".farm")
    held.lock()
    try:
        assert main(["thumbnails", str(only_broken), "--out", str(out), "--no-progress"]) == 2
        assert "another `farm thumbnails` is writing" in capsys.readouterr().err
    finally:
        held.unlock()


# --- resuming a run that was killed


def test_a_killed_run_resumes_where_it_stopped(tmp_path, monkeypatch):
    root = tmp_path / "models"
    write_samples(root)
    for i in range(14):
        shutil.copy(root / "crate.mdx", root / f"copy{i:02d}.mdx")
    total = len(list(root.glob("*.mdx")))
    out = tmp_path / "out"
    env = {**os.environ, "FARM_RENDERER": "synthetic", "FARM_SYNTHETIC_DELAY_MS": "150"}
    env.pop("FARM_BROKER_URL", None)
    proc = subprocess.Popen([sys.executable, "-m", "farm.cli", "thumbnails", str(root), "--out", str(out),
                             "--workers", "1", "--no-progress", "--size", "32"], cwd=ROOT, env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True)
    journal = out / ".farm" / "journal.jsonl"
    deadline = time.monotonic() + 60
    try:
        while time.monotonic() < deadline and proc.poll() is None:
            if journal.is_file() and journal.read_bytes().count(b"\n") >= 4:
                break
            time.sleep(0.02)
        assert proc.poll() is None, proc.stderr.read().decode()
        os.killpg(proc.pid, signal.SIGKILL)  # the coordinator and its pool, mid-run
        proc.wait(10)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    lines = journal.read_bytes().splitlines()
    finished = {json.loads(line)["id"] for line in lines}
    assert 4 <= len(finished) < total and not (out / "index.json").exists()
    with open(journal, "ab") as f:
        f.write(b'{"id": "models/crate.mdx", "rec')  # a torn line, as a kill mid-write would leave
    assert all((out / "thumbs" / f"{model_id}.png").is_file() for model_id in finished)

    monkeypatch.setenv("FARM_RENDERER", "synthetic")
    monkeypatch.delenv("FARM_SYNTHETIC_DELAY_MS", raising=False)
    summary = make_thumbnails([root], out, ThumbnailOptions(size=32), workers=2, progress=False)
    everything = {f"models/{p.name}" for p in root.glob("*.mdx")}
    assert set(summary.rendered) == everything - finished and summary.skipped == len(finished)
    assert index_of(out)["counts"] == {"models": total, "done": total, "failed": 0}
    assert not journal.exists()


def test_a_model_that_kills_its_worker_gets_a_placeholder(tmp_path, monkeypatch):
    """The local pool's crash handling applies to thumbnails as to frames: the model that kills its
    process fails after the delivery limit, every other model renders."""
    root = tmp_path / "models"
    write_samples(root)
    shutil.copy(root / "crate.mdx", root / "crash.mdx")
    monkeypatch.setenv("FARM_RENDERER", "test_farm_local:CrashingRenderer")
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(Path(__file__).parent), os.environ.get("PYTHONPATH", "")]))
    summary = make_thumbnails([root], tmp_path / "out", ThumbnailOptions(size=32), workers=2, progress=False)
    assert list(summary.failed) == ["models/crash.mdx"] and "died 3 times" in summary.failed["models/crash.mdx"]
    assert index_of(tmp_path / "out")["counts"] == {"models": 4, "done": 3, "failed": 1}
