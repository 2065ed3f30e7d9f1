"""Halo shader and bitmap tags that are not under the tag root warn like missing textures (issue 24,
item 4): `farm render` names the tag, where the search looked and `--tag-root`; with the tag root
given there is no warning and the pixels change; the asset record lists them, so a job's
`missing = "fail"` fails such a frame."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
from conftest import ROOT
from test_halo_tagbuild import bitmap_tag, model_tag, shader_model, uncompressed

os.environ.setdefault("EGL_PLATFORM", "surfaceless")
os.environ.setdefault("PYOPENGL_PLATFORM", "egl")

from farm.run.jobs import run_job  # noqa: E402
from renderer.formats import load  # noqa: E402
from renderer.png import read_png  # noqa: E402
from renderer.texture_set import load_textures  # noqa: E402

ENV = {"EGL_PLATFORM": "surfaceless", "PYOPENGL_PLATFORM": "egl", "PATH": "/usr/bin:/bin"}
RED = bitmap_tag(1, 1, 11, bytes([0, 0, 255, 255]))  # one red A8R8G8B8 texel
CAMERA = "0,0,10:0,0,0:0,1,0:40"


def farm(*args) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "farm.cli", *map(str, args)], cwd=ROOT, capture_output=True,
                          text=True, timeout=120, env=ENV)


def _textures(path):
    """The texture set of the Halo model at `path`, drawn in the context its load returned."""
    model, context = load(path)
    return load_textures(model, context=context)


def write(root, files: dict[str, bytes]) -> None:
    for rel, data in files.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(data)


def split_tree(tmp_path, shader_in_model_tree: bool):
    """a/tags/m/m.gbxmodel (a triangle filling the view, shader s\\o); b/tags holds the red bitmap
    and, unless `shader_in_model_tree`, the shader too: tags outside the tag root the model sees."""
    u = uncompressed([(-1, -1, 0), (3, -1, 0), (-1, 3, 0)], uvs=[(0, 0), (1, 0), (0, 1)])
    model = tmp_path / "a" / "tags" / "m" / "m.gbxmodel"
    write(tmp_path / "a" / "tags", {"m/m.gbxmodel": model_tag(shaders=[(b"soso", "s\\o")], geometries=[
        [{"shader": 0, "uncompressed": u, "strip": [0, 1, 2]}]])})
    shader = {"s/o.shader_model": shader_model("b\\red", flags=4 | 2)}
    write(tmp_path / ("a" if shader_in_model_tree else "b") / "tags", shader)
    write(tmp_path / "b" / "tags", {"b/red.bitmap": RED})
    return model, tmp_path / "b" / "tags"


def test_farm_render_warns_about_a_shader_outside_the_tag_root_and_tag_root_fixes_it(tmp_path):
    model, other = split_tree(tmp_path, shader_in_model_tree=False)
    flat, good = tmp_path / "flat.png", tmp_path / "good.png"
    r = farm("render", model, "-o", flat, "--size", 16, "--camera", CAMERA)
    assert r.returncode == 0, r.stderr
    looked = tmp_path / "a" / "tags"
    assert (f"warning: {model}: assets: halo shader 's\\\\o' was not found under the tag root; looked in 1 place(s):"
            f" {looked}; drawn two-sided in its flat colour") in r.stderr, r.stderr
    assert f"were not found under the tag root {looked}; name the tags folder that holds them with --tag-root DIR" \
        in r.stderr
    r = farm("render", model, "-o", good, "--size", 16, "--camera", CAMERA, "--tag-root", other)
    assert r.returncode == 0 and "warning" not in r.stderr and "hint" not in r.stderr, r.stderr
    a, _ = read_png(flat.read_bytes())
    b, _ = read_png(good.read_bytes())
    assert a[8, 8, :3].tolist() != [255, 0, 0] and b[8, 8, :3].tolist() == [255, 0, 0]
    assert not np.array_equal(a, b)


def test_a_missing_bitmap_tag_is_recorded_and_warned_like_a_texture(tmp_path):
    model, _ = split_tree(tmp_path, shader_in_model_tree=True)
    texset = _textures(model)
    (entry,) = [e for e in texset.search.record if e.get("missing")]
    root = str(tmp_path / "a" / "tags")
    assert entry == {"kind": "halo bitmap", "asked": "b\\red.bitmap", "missing": True,
                     "why": "was not found under the tag root", "looked": [root]}
    sentences = [d.message for d in texset.diagnostics]
    assert sentences == [f"halo bitmap 'b\\\\red.bitmap' was not found under the tag root; looked in 1 place(s):"
                         f" {root}; drawn in the shader's flat colour"]
    write(tmp_path / "a" / "tags", {"b/red.bitmap": RED})
    found = _textures(model)
    assert not found.diagnostics and not found.search.missing()


def test_no_tag_root_is_recorded_without_places_and_a_refused_path_as_refused(tmp_path):
    u = uncompressed([(0, 0, 0), (1, 0, 0), (0, 1, 0)])
    path = tmp_path / "loose" / "m.gbxmodel"
    write(tmp_path / "loose", {"m.gbxmodel": model_tag(shaders=[(b"soso", "s\\o")], geometries=[
        [{"shader": 0, "uncompressed": u, "strip": [0, 1, 2]}]])})
    (entry,) = _textures(path).search.missing()
    assert entry["kind"] == "halo shader" and entry["why"].startswith("has no tag root") and entry["looked"] == []
    write(tmp_path / "t" / "tags", {"m/m.gbxmodel": model_tag(shaders=[(b"soso", "..\\up"), (b"sgla", "s\\g")])})
    texset = _textures(tmp_path / "t" / "tags" / "m" / "m.gbxmodel")
    # the refused path is missing; the glass shader is a class that is not read, not a missing tag
    assert [(e["asked"], e["why"], e["looked"]) for e in texset.search.missing()] == [
        ("..\\up", "refused: component '..' is a parent reference or only dots and spaces", [])]


def test_missing_fail_fails_a_halo_frame_whose_shader_is_not_found(tmp_path):
    model, _ = split_tree(tmp_path, shader_in_model_tree=False)
    base = f'size = "16x16"\ntimestamps = [0]\ncamera = "{CAMERA}"\nmodels = ["a/tags/m/m.gbxmodel"]\n'
    (tmp_path / "warn.toml").write_text('name = "warn"\n' + base)
    (tmp_path / "fail.toml").write_text('name = "fail"\nmissing = "fail"\n' + base)
    warn = run_job(tmp_path / "warn.toml", out=tmp_path / "o1", workers=1, broker="local", progress=False)
    (t,) = warn.traces.values()
    assert t["status"] == "done" and t["missing"] == ["s\\o"]
    fail = run_job(tmp_path / "fail.toml", out=tmp_path / "o2", workers=1, broker="local", progress=False)
    (t,) = fail.traces.values()
    assert t["status"] == "failed" and "1 asset(s) not found: s\\o (missing = \"fail\")" in t["error"], t
