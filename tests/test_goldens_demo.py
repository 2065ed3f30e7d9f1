"""The project's own regression suite: the committed goldens/ folder, `farm demo` end to end, `farm
run` comparing a manifest that has goldens, and how the suite degrades on another GL environment."""

from __future__ import annotations

import filecmp
import hashlib
import json
import os
import shutil
from pathlib import Path

import pytest

os.environ.setdefault("EGL_PLATFORM", "surfaceless")
os.environ.setdefault("PYOPENGL_PLATFORM", "egl")

from golden_runs import INTEL, NVIDIA, make_run, noisy  # noqa: E402

from farm.cli import main  # noqa: E402
from farm.compare.runs import compare_run  # noqa: E402
from farm.goldens import GENERIC, GoldenIndex, env_key, png_pixel_digest  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
GOLDENS = ROOT / "goldens"


@pytest.fixture(autouse=True)
def local_only(monkeypatch):
    monkeypatch.delenv("FARM_BROKER_URL", raising=False)
    monkeypatch.delenv("FARM_GOLDENS", raising=False)
    monkeypatch.delenv("FARM_OUT", raising=False)


def committed_images() -> dict[str, object]:
    from renderer.png import read_png

    index = GoldenIndex.load(GOLDENS)
    return {trace: read_png(index.image_path(e["approved"][0]["png"]))[0]
            for (trace, env), e in index.entries.items() if env == GENERIC}


def test_committed_sample_models_are_the_built_ones(tmp_path):
    from renderer.samples import write_samples

    write_samples(tmp_path)
    built = sorted(p.relative_to(tmp_path).as_posix() for p in tmp_path.rglob("*") if p.is_file())
    committed = sorted(p.relative_to(GOLDENS / "models").as_posix() for p in (GOLDENS / "models").rglob("*")
                       if p.is_file())
    assert built == committed
    different = [rel for rel in built if not filecmp.cmp(tmp_path / rel, GOLDENS / "models" / rel, shallow=False)]
    assert not different, (
        f"renderer/samples changed {different}: refresh goldens/models with python -c \"from renderer.samples import"
        f" write_samples; write_samples('goldens/models')\", run `make demo` and approve the new frames after review")


def test_committed_index_is_canonical_and_complete():
    index = GoldenIndex.load(GOLDENS)
    assert (GOLDENS / "index.jsonl").read_text() == index.text()
    assert index.entries and all(env == GENERIC for _, env in index.entries)
    for (trace, _), entry in index.entries.items():
        assert trace.endswith("|auto|128x128|msaa0|team0|transparent")
        for a in entry["approved"]:
            data = index.image_path(a["png"]).read_bytes()
            digest, size, png_trace = png_pixel_digest(data)
            assert digest == a["digest"] and list(size) == a["size"] == [128, 128]
            assert hashlib.sha256(data).hexdigest() == a["png"]  # the exact bytes the run stored
            assert png_trace["gl"] == a["gl"] and a["by"] and a["at"] and a["run"]
    assert not index.unreferenced_images() and not index.missing_images()
    log = index.log()
    assert log and log[0]["action"] == "approve"
    assert sum(os.path.getsize(p) for p in (GOLDENS / "images").iterdir()) < 1_000_000  # small repo


def test_no_stale_goldens(capsys):
    assert main(["goldens", "--stale", str(GOLDENS / "manifest.toml")]) == 0
    assert "every golden is used" in capsys.readouterr().out


@pytest.mark.gl
def test_demo_end_to_end(tmp_path, capsys, monkeypatch):
    pytest.importorskip("renderer.anim")
    monkeypatch.setenv("FARM_BROKER_URL", "redis://127.0.0.1:1/0")  # the demo runs locally whatever this says
    rc = main(["demo", "--out", str(tmp_path / "demo")])
    out = capsys.readouterr().out
    assert rc == 0, out
    assert "MDX -> MDL -> MDX equal" in out and "warning" not in out
    assert f"PASSED: {len(GoldenIndex.load(GOLDENS).traces())} pass of" in out
    assert "demo: PASSED" in out
    report = tmp_path / "demo" / "report"
    assert (report / "index.html").is_file() and (report / "junit.xml").is_file()
    results = json.loads((report / "results.json").read_text())
    assert results["verdict"] == "pass" and results["compared"] == results["counts"]["total"] > 0


@pytest.mark.gl
def test_farm_run_compares_a_manifest_that_has_goldens(tmp_path, capsys):
    pytest.importorskip("renderer.anim")
    manifest = str(GOLDENS / "manifest.toml")
    assert main(["run", manifest, "--out", str(tmp_path / "s"), "--no-progress", "--report",
                 str(tmp_path / "r")]) == 0
    out = capsys.readouterr().out
    assert "PASSED" in out and (tmp_path / "r" / "index.html").is_file()
    # The manifest's "50%" traces are keyed by the fraction now; the committed goldens stay under the ms
    # keys they were approved with (farm.goldens.index, Legacy keys), and answer for them unchanged.
    results = json.loads((tmp_path / "r" / "results.json").read_text())
    percent = [t for k, t in results["traces"].items() if "|50%|" in k]
    assert len(percent) == 6 and {t["status"] for t in percent} == {"pass"}
    assert not any("%" in trace for trace in GoldenIndex.load(GOLDENS).traces())
    # a copy with one trace more: the new trace fails the run unless new traces are allowed
    shutil.copytree(GOLDENS, tmp_path / "g", ignore=shutil.ignore_patterns("images"))
    (tmp_path / "g" / "images").symlink_to(GOLDENS / "images")
    text = (tmp_path / "g" / "manifest.toml").read_text().replace('timestamps = [0, "50%"]',
                                                                  'timestamps = [0, "50%", "100%"]', 1)
    (tmp_path / "g" / "manifest.toml").write_text(text)
    assert main(["run", str(tmp_path / "g" / "manifest.toml"), "--out", str(tmp_path / "s"), "--no-progress"]) == 1
    assert "have no golden yet" in capsys.readouterr().out
    assert main(["run", str(tmp_path / "g" / "manifest.toml"), "--out", str(tmp_path / "s"), "--no-progress",
                 "--allow-new"]) == 0
    assert "PASSED: 4 new, 16 pass of 20 traces" in capsys.readouterr().out
    assert main(["run", str(tmp_path / "g" / "manifest.toml"), "--out", str(tmp_path / "s"), "--no-progress",
                 "--no-compare"]) == 0
    last = capsys.readouterr().out
    assert "PASSED" not in last and "FAILED" not in last and "no golden" not in last


def test_another_environment_degrades_to_ssim(tmp_path):
    """Frames from another CPU or GPU that differ by a few levels everywhere pass on SSIM and the
    pixel gate, not on the digest; a real change still fails and names both environments."""
    images = committed_images()
    run = make_run(tmp_path / "s", {k: noisy(v, 2, seed=i) for i, (k, v) in enumerate(sorted(images.items()))},
                   gl=INTEL)
    res = compare_run(run, GOLDENS, write=False, heatmaps=False)
    assert res["verdict"] == "pass", [t["reason"] for t in res["traces"].values() if t["status"] != "pass"]
    assert {t["match"] for t in res["traces"].values()} == {"similar"}
    k = sorted(images)[0]
    changed = images[k].copy()
    changed[40:90, 40:90] = (255, 0, 255, 255)  # a magenta block over the model
    gpu = make_run(tmp_path / "g", {k: changed}, gl=NVIDIA)
    t = compare_run(gpu, GOLDENS, write=False, heatmaps=False)["traces"][k]
    assert t["status"] == "fail" and env_key(NVIDIA) in t["reason"] and "llvmpipe" in t["reason"]
