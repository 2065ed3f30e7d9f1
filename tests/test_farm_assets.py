"""The farm's side of the asset search (issue 13): jobs find textures a level or more above the
model inside a map folder with no flags, name the ones they miss (sidecar, job state, console),
fail such frames under `missing = "fail"`, render models inside map archives (`maps/x.w3x:...`
in a manifest) to the same pixels as the folder form, and re-render a thumbnail when a texture it
used changes."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

os.environ.setdefault("EGL_PLATFORM", "surfaceless")
os.environ.setdefault("PYOPENGL_PLATFORM", "egl")

from farm.cli import main  # noqa: E402
from farm.run.jobs import run_job  # noqa: E402
from farm.thumbs import ThumbnailOptions, make_thumbnails  # noqa: E402
from renderer.formats import load_model, save_model  # noqa: E402
from renderer.png import read_png  # noqa: E402
from renderer.samples import write_samples  # noqa: E402


@pytest.fixture
def map_tree(tmp_path) -> Path:
    """maps/keep.w3x/ (an extracted map): the crate sample under war3mapImported/units/, its
    Textures\\ at the map's top, two levels up; the glow texture deleted (a missing asset)."""
    samples = tmp_path / "samples"
    write_samples(samples)
    root = tmp_path / "maps" / "keep.w3x"
    (root / "war3mapImported" / "units").mkdir(parents=True)
    (root / "war3map.w3i").write_bytes(b"\0" * 16)
    shutil.copy(samples / "crate.mdx", root / "war3mapImported" / "units" / "crate.mdx")
    shutil.copytree(samples / "Textures", root / "Textures")
    (root / "Textures" / "Glow.tga").unlink()
    return tmp_path


def packed_map(map_tree, folder, **kw):
    """maps/keep.w3x packed with smpq into `folder`/keep.w3x (skips when the tools are missing)."""
    mpq_build = pytest.importorskip("mpq_build")
    why = mpq_build.have_tools()
    if why:
        pytest.skip(why)
    folder.mkdir(exist_ok=True)
    return mpq_build.build(map_tree / "maps" / "keep.w3x", folder / "keep.w3x", **kw)


def _sidecar(job, key) -> dict:
    return job.store.frame_sidecar(job.id, job.traces[key]["batch"], key, job.traces[key]["digest"])


def test_a_job_finds_textures_above_the_model_and_names_the_missing_ones(map_tree, capsys):
    manifest = map_tree / "job.toml"
    manifest.write_text('name = "assets"\nsize = "32x32"\ntimestamps = [0]\nsequences = ["Stand"]\n'
                        'models = ["maps/**/*.mdx"]\n')
    job = run_job(manifest, out=map_tree / "out", workers=1, broker="local", progress=False)
    (key,) = job.traces
    assert job.traces[key]["status"] == "done"
    assets = _sidecar(job, key)["assets"]
    found = {a["asked"]: a for a in assets if not a.get("missing")}
    crate = found["Textures\\Crate.tga"]
    assert Path(crate["found"]) == (map_tree / "maps" / "keep.w3x" / "Textures" / "Crate.tga")
    import hashlib

    assert crate["sha256"] == hashlib.sha256(Path(crate["found"]).read_bytes()).hexdigest()
    missing = [a for a in assets if a.get("missing")]
    assert [a["asked"] for a in missing] == ["Textures\\Glow.tga"] and missing[0]["looked"]
    assert job.traces[key]["missing"] == ["Textures\\Glow.tga"]
    from farm.run.jobs import status_text

    text = status_text(job)
    assert "warning: 1 frame(s) drew placeholders for 1 missing asset(s): Textures\\Glow.tga" in text


def test_missing_fail_fails_those_frames(map_tree):
    manifest = map_tree / "strict.toml"
    manifest.write_text('name = "strict"\nsize = "32x32"\ntimestamps = [0]\nsequences = ["Stand"]\n'
                        'missing = "fail"\nmodels = ["maps/**/*.mdx"]\n')
    job = run_job(manifest, out=map_tree / "out2", workers=1, broker="local", progress=False)
    (t,) = job.traces.values()
    assert t["status"] == "failed" and "1 asset(s) not found: Textures\\Glow.tga (missing = \"fail\")" in t["error"]
    bad = map_tree / "bad.toml"
    bad.write_text('missing = "maybe"\nmodels = ["maps/**/*.mdx"]\n')
    assert main(["run", str(bad), "--out", str(map_tree / "o3"), "--no-progress"]) == 2


def test_models_inside_map_archives_render_like_the_folder_form(map_tree, tmp_path):
    packed_map(map_tree, map_tree / "packed", map_header=True)
    folder_job = map_tree / "folder.toml"
    folder_job.write_text('name = "f"\nsize = "48x48"\ntimestamps = [0, "50%"]\nmodels = ["maps/**/*.mdx"]\n')
    archive_job = map_tree / "archive.toml"
    archive_job.write_text('name = "a"\nsize = "48x48"\ntimestamps = [0, "50%"]\n'
                           'models = ["packed/*.w3x:**/*.mdx"]\n')
    a = run_job(folder_job, out=tmp_path / "fo", workers=1, broker="local", progress=False)
    b = run_job(archive_job, out=tmp_path / "ao", workers=1, broker="local", progress=False)
    assert {t["status"] for t in b.traces.values()} == {"done"}
    key_b = sorted(b.traces)[0]
    assert key_b.startswith("packed/keep.w3x:war3mapImported/units/crate.mdx|")
    pairs = [(ka, kb) for ka in sorted(a.traces) for kb in sorted(b.traces) if ka.split("|")[1:] == kb.split("|")[1:]]
    assert len(pairs) == len(a.traces) == len(b.traces)
    for ka, kb in pairs:
        pa, _ = read_png(a.store.read_image(a.traces[ka]["digest"]))
        pb, _ = read_png(b.store.read_image(b.traces[kb]["digest"]))
        assert (pa == pb).all(), (ka, kb)
        found = [x["found"] for x in _sidecar(b, kb)["assets"] if x.get("found") and "Crate" in x["asked"]]
        assert found and ".w3x:" in found[0], found


def test_editing_a_texture_renders_its_thumbnails_again(map_tree, tmp_path):
    out = tmp_path / "thumbs"
    opts = ThumbnailOptions(size=32, sheet=0)
    first = make_thumbnails([map_tree / "maps"], out, opts, workers=1, progress=False)
    assert len(first.rendered) == 1 and not first.failed
    index = json.loads((out / "index.json").read_text())
    assert index["models"][0]["missing"] == ["Textures\\Glow.tga"]
    assert "missing" in (out / "index.html").read_text()
    again = make_thumbnails([map_tree / "maps"], out, opts, workers=1, progress=False)
    assert again.skipped == 1 and not again.rendered
    tex = map_tree / "maps" / "keep.w3x" / "Textures" / "Crate.tga"
    data = bytearray(tex.read_bytes())
    data[-1] ^= 0xFF  # one texel of the crate changes
    tex.write_bytes(bytes(data))
    third = make_thumbnails([map_tree / "maps"], out, opts, workers=1, progress=False)
    assert third.rendered == first.rendered and third.skipped == 0


def test_render_refuses_an_asset_root_that_is_neither_folder_nor_archive(map_tree, capsys):
    model = map_tree / "maps" / "keep.w3x" / "war3mapImported" / "units" / "crate.mdx"
    (map_tree / "notes.txt").write_text("x")
    assert main(["render", str(model), "-o", str(map_tree / "x.png"), "--assets", str(map_tree / "notes.txt")]) == 2
    assert "is not a folder or an MPQ archive" in capsys.readouterr().err
    assert main(["render", str(model), "-o", str(map_tree / "x.png"), "--size", "16x16"]) == 0
    err = capsys.readouterr().err
    assert err.count("Glow.tga") == 1 and "Crate.tga" not in err, err  # one line per missing texture


def test_diff_names_the_inputs_that_changed_next_to_the_pixels(map_tree, capsys):
    manifest = map_tree / "job.toml"
    manifest.write_text('name = "d"\nsize = "32x32"\ntimestamps = [0]\nsequences = ["Stand"]\n'
                        'models = ["maps/**/*.mdx"]\n')
    out = map_tree / "out"
    base = run_job(manifest, out=out, workers=1, broker="local", progress=False, job_id="base")
    tex = map_tree / "maps" / "keep.w3x" / "Textures" / "Crate.tga"
    from PIL import Image

    with Image.open(tex) as im:
        Image.new(im.mode, im.size, (255, 0, 0, 255)[: len(im.mode)]).save(tex)
    run_job(manifest, out=out, workers=1, broker="local", progress=False, job_id="head")
    assert main(["diff", "base", "head", "--out", str(out)]) == 1
    text = capsys.readouterr().out
    assert "changed" in text and "input Textures\\Crate.tga: changed (" in text, text
    assert "Glow.tga" not in text  # missing in both runs: not a change
    assert "model " not in text  # the model file did not change
    assert base.traces


def test_diff_names_a_changed_model_file(map_tree, capsys):
    """The model file is an input like its textures: a diff whose pixels changed because the model's own
    bytes did names the model, with both content hashes, and no texture."""
    manifest = map_tree / "job.toml"
    manifest.write_text('name = "d"\nsize = "32x32"\ntimestamps = [0]\nsequences = ["Stand"]\n'
                        'models = ["maps/**/*.mdx"]\n')
    out = map_tree / "out"
    base = run_job(manifest, out=out, workers=1, broker="local", progress=False, job_id="base")
    path = map_tree / "maps" / "keep.w3x" / "war3mapImported" / "units" / "crate.mdx"
    model = load_model(path)
    model.geosets[0].vertices = model.geosets[0].vertices * 0.5  # the crate shrinks
    save_model(model, path)
    head = run_job(manifest, out=out, workers=1, broker="local", progress=False, job_id="head")
    assert main(["diff", "base", "head", "--out", str(out)]) == 1
    text = capsys.readouterr().out
    (key,) = base.traces
    old_hash, new_hash = (_sidecar(j, key)["trace"]["model_hash"] for j in (base, head))
    assert old_hash != new_hash
    model_name = _sidecar(head, key)["trace"]["model"]
    assert f"model {model_name}: changed ({old_hash[:8]} -> {new_hash[:8]})" in text, text
    assert "input Textures" not in text  # no texture changed


def test_thumbnails_list_the_models_inside_map_archives(map_tree, tmp_path):
    packed = tmp_path / "packed"
    packed_map(map_tree, packed, map_header=True)
    summary = make_thumbnails([packed], tmp_path / "t", ThumbnailOptions(size=32, sheet=0), workers=1, progress=False)
    index = json.loads((tmp_path / "t" / "index.json").read_text())
    assert [m["id"] for m in index["models"]] == ["packed/keep.w3x:war3mapImported/units/crate.mdx"]
    assert index["models"][0]["status"] == "done" and not summary.failed
    assert index["models"][0]["missing"] == ["Textures\\Glow.tga"]


def test_a_frame_with_placeholders_is_reported_and_not_approved_by_accident(map_tree, tmp_path, capsys):
    manifest = map_tree / "job.toml"
    manifest.write_text('name = "m"\nsize = "32x32"\ntimestamps = [0]\nsequences = ["Stand"]\n'
                        'models = ["maps/**/*.mdx"]\n')
    out, goldens, report = map_tree / "out", tmp_path / "goldens", tmp_path / "report"
    job = run_job(manifest, out=out, workers=1, broker="local", progress=False, job_id="m1")
    (key,) = job.traces
    assert main(["approve", "m1", "--all", "--out", str(out), "--goldens", str(goldens)]) == 1
    err = capsys.readouterr().err
    assert "drew placeholders for missing assets (Textures\\Glow.tga); not approved (pass --allow-missing" in err
    assert not (goldens / "index.jsonl").exists() or key not in (goldens / "index.jsonl").read_text()
    assert main(["compare", "m1", "--out", str(out), "--goldens", str(goldens), "--allow-new",
                 "-o", str(report)]) == 0  # every trace new, and allowed
    capsys.readouterr()
    junit = (report / "junit.xml").read_text()
    assert "missing assets (drawn as placeholders): Textures\\Glow.tga" in junit
    html = (report / "index.html").read_text()
    assert "missing assets" in html and "Textures\\Glow.tga" in html
    assert main(["approve", "m1", "--all", "--allow-missing", "--out", str(out), "--goldens", str(goldens)]) == 0
    assert key in (goldens / "index.jsonl").read_text()


def test_an_archive_without_a_listfile_is_named_and_read_with_one(map_tree, tmp_path, capsys):
    packed = tmp_path / "packed"
    packed_map(map_tree, packed, listfile=False)
    names = tmp_path / "names.txt"
    names.write_text("war3mapImported\\units\\crate.mdx\nTextures\\Crate.tga\n")
    out = tmp_path / "t"
    assert main(["thumbnails", str(packed), "--out", str(out), "--size", "32", "--sheet", "0", "--workers", "1",
                 "--no-progress"]) == 0
    text = capsys.readouterr().out
    assert "warning:" in text and "keep.w3x" in text and "--listfile" in text, text
    assert main(["thumbnails", str(packed), "--out", str(out), "--size", "32", "--sheet", "0", "--workers", "1",
                 "--no-progress", "--listfile", str(names)]) == 0
    index = json.loads((out / "index.json").read_text())
    assert [m["id"] for m in index["models"]] == ["packed/keep.w3x:war3mapImported/units/crate.mdx"]
    assert index["models"][0]["status"] == "done"
    manifest = tmp_path / "job.toml"
    manifest.write_text('size = "16x16"\ntimestamps = [0]\nsequences = ["Stand"]\nlistfile = "names.txt"\n'
                        'models = ["packed/*.w3x:**/*.mdx"]\n')
    job = run_job(manifest, out=tmp_path / "store", workers=1, broker="local", progress=False)
    assert {t["status"] for t in job.traces.values()} == {"done"} and len(job.traces) == 1
