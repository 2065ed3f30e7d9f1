"""Links that leave the roots (issue 34 item 4): a model or an archive that is a link to a file
outside the roots named is refused by default, naming the link and where it points (thumbnails:
`--follow-links` reads it; run: `follow_links = true` in the manifest); a texture found through a
link out of the searched folders is refused, and the missing-texture warning names the link, unless
the same setting (a render setting: farm render's --follow-links too) says to read it."""

from __future__ import annotations

import json
import os

os.environ.setdefault("EGL_PLATFORM", "surfaceless")
os.environ.setdefault("PYOPENGL_PLATFORM", "egl")

import pytest  # noqa: E402

from farm.cli import main  # noqa: E402
from farm.plan.manifest import ManifestError, load_manifest  # noqa: E402
from renderer.samples import write_samples  # noqa: E402

THUMBS = ["--size", "32", "--msaa", "0", "--workers", "1", "--no-progress", "--sheet", "0"]


@pytest.fixture
def tree(tmp_path):
    """root/crate.mdx with Textures/Crate.tga a link to a file outside root (named like /etc/passwd
    would be), and root/fx.mdx a link to a model outside root."""
    write_samples(tmp_path / "samples")
    root = tmp_path / "site" / "root"
    (root / "Textures").mkdir(parents=True)
    (root / "crate.mdx").write_bytes((tmp_path / "samples" / "crate.mdx").read_bytes())
    secret = tmp_path / "secret" / "Crate.tga"
    secret.parent.mkdir()
    secret.write_bytes((tmp_path / "samples" / "Textures" / "Crate.tga").read_bytes())
    (root / "Textures" / "Crate.tga").symlink_to(secret)
    (root / "fx.mdx").symlink_to(tmp_path / "samples" / "effects.mdx")
    return root, secret, tmp_path / "samples" / "effects.mdx"


def test_thumbnails_refuse_links_out_of_the_roots(tree, tmp_path, capsys):
    root, secret, effects = tree
    out = tmp_path / "out"
    assert main(["thumbnails", str(root), "-o", str(out), *THUMBS]) == 0
    printed = capsys.readouterr().out
    assert f"warning: root/fx.mdx: refused: a link to {effects}, outside the roots named (--follow-links" \
           " follows it)" in printed
    (crate,) = json.loads((out / "index.json").read_text())["models"]  # fx.mdx is not read
    assert crate["path"] == "crate.mdx" and "Textures\\Crate.tga" in crate["missing"]
    message = next(d["message"] for d in crate["diagnostics"] if "Crate.tga" in d["message"])
    assert f"refused {root / 'Textures' / 'Crate.tga'}: a link to {secret}, outside the searched folders" in message
    # --follow-links: the model link is read (and the texture link: test_follow_links_reads_a_texture_link_...)
    assert main(["thumbnails", str(root), "-o", str(tmp_path / "out2"), *THUMBS, "--follow-links"]) == 0
    models = {m["path"]: m for m in json.loads((tmp_path / "out2" / "index.json").read_text())["models"]}
    assert set(models) == {"crate.mdx", "fx.mdx"} and models["fx.mdx"]["status"] == "done"
    # a link that stays inside the roots named is read as before
    (root / "Textures" / "Crate.tga").unlink()
    (root / "Textures" / "Crate.tga").symlink_to(root / "crate_tex.tga")
    (root / "crate_tex.tga").write_bytes(secret.read_bytes())
    assert main(["thumbnails", str(root), "-o", str(tmp_path / "out3"), *THUMBS]) == 0
    (crate,) = json.loads((tmp_path / "out3" / "index.json").read_text())["models"]
    assert "Textures\\Crate.tga" not in (crate["missing"] or [])


def test_run_refuses_a_model_link_out_of_the_glob(tree):
    root, _, effects = tree
    manifest = root.parent / "job.toml"
    manifest.write_text('name = "l"\nsize = "16x16"\ntimestamps = [0]\nmodels = ["root/*.mdx"]\n')
    with pytest.raises(ManifestError) as e:
        load_manifest(manifest)
    assert f"matches {root / 'fx.mdx'}, a link to {effects}, outside {root}; refused" in str(e.value)
    manifest.write_text('name = "l"\nfollow_links = true\nsize = "16x16"\ntimestamps = [0]\nmodels = ["root/*.mdx"]\n')
    assert {p.rel for p in load_manifest(manifest).plans} == {"root/crate.mdx", "../samples/effects.mdx"}
    manifest.write_text('name = "l"\nfollow_links = "yes"\nmodels = ["root/*.mdx"]\n')
    with pytest.raises(ManifestError, match="'follow_links' must be true or false"):
        load_manifest(manifest)


def _png(folder):
    """The run's frames (one a sequence of the crate), by their bytes."""
    return sorted(p.read_bytes() for p in (folder / "images").rglob("*.png"))


def test_follow_links_reads_a_texture_link_in_render_thumbnails_and_run(tree, tmp_path, capsys):
    """The texture link out of the searched folders: refused by default (placeholder, the link named),
    read with --follow-links (farm render, thumbnails) and `follow_links = true` (farm run, whose
    batches carry the setting to the workers): the frame is the one drawn with the file itself."""
    root, secret, _ = tree
    (root / "fx.mdx").unlink()
    plain = tmp_path / "plain"
    (plain / "Textures").mkdir(parents=True)
    (plain / "crate.mdx").write_bytes((root / "crate.mdx").read_bytes())
    (plain / "Textures" / "Crate.tga").write_bytes(secret.read_bytes())
    flags = ["--size", "32x32", "--camera", "auto"]
    shots = {}
    for name, model, extra in (("plain", plain, []), ("refused", root, []), ("followed", root, ["--follow-links"])):
        out = tmp_path / f"{name}.png"
        assert main(["render", str(model / "crate.mdx"), "-o", str(out), *flags, *extra]) == 0
        shots[name] = (out.read_bytes(), capsys.readouterr())
    assert shots["followed"][0] == shots["plain"][0] != shots["refused"][0]
    assert "outside the searched folders" in shots["refused"][1].err + shots["refused"][1].out
    assert "outside the searched folders" not in shots["followed"][1].err + shots["followed"][1].out

    assert main(["thumbnails", str(root), "-o", str(tmp_path / "t"), *THUMBS, "--follow-links"]) == 0
    (crate,) = json.loads((tmp_path / "t" / "index.json").read_text())["models"]
    assert "Textures\\Crate.tga" not in crate["missing"]
    assert not any("refused" in d["message"] for d in crate.get("diagnostics") or [])

    frames = {}
    for follow in (False, True):
        manifest = root.parent / f"job-{follow}.toml"
        manifest.write_text(f'name = "l"\n{"follow_links = true" if follow else ""}\nsize = "32x32"\n'
                            'timestamps = [0]\nmodels = ["root/crate.mdx"]\n')
        out = tmp_path / f"run-{follow}"
        assert main(["run", str(manifest), "--out", str(out), "--workers", "1", "--no-progress"]) in (0, 1)
        capsys.readouterr()
        frames[follow] = _png(out)
    plain_job = plain.parent / "plain.toml"
    plain_job.write_text('name = "p"\nsize = "32x32"\ntimestamps = [0]\nmodels = ["plain/crate.mdx"]\n')
    assert main(["run", str(plain_job), "--out", str(tmp_path / "run-plain"), "--workers", "1", "--no-progress"]) \
        in (0, 1)
    assert frames[True] == _png(tmp_path / "run-plain") != frames[False]
