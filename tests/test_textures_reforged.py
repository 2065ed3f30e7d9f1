"""Reforged texture paths: a model's `.tif` (and `.blp`) texture finds the `.dds` that extracted
Reforged data holds (`renderer.assets.paths.extension_variants`), in the reference viewer's order
(a `.tif` is asked as `.dds` first), through the one asset search, in a rendered frame."""

from __future__ import annotations

import io

import numpy as np
from PIL import Image
from render_util import FRONT_CAMERA, layer, quad, renderer, solid, write_model

from renderer.assets.paths import extension_variants
from renderer.formats import load_model
from renderer.formats.mdx import save_mdx
from renderer.frame import FrameSpec
from renderer.model import Texture

GREEN, MAGENTA = (0, 255, 0, 255), (255, 0, 255, 255)
FILLER = solid((9, 9, 9, 255))  # written only to build the model, removed before it renders


def dds(rgba) -> bytes:
    out = io.BytesIO()
    Image.new("RGBA", (4, 4), rgba).save(out, "DDS")
    return out.getvalue()


def test_variant_order():
    assert extension_variants("Textures\\Knight.tif") == ["Textures\\Knight.dds", "Textures\\Knight.blp",
                                                          "Textures\\Knight.tga", "Textures\\Knight.tif"]
    assert extension_variants("a/B.TIF")[0] == "a/B.dds"
    assert extension_variants("x.blp") == ["x.blp", "x.dds", "x.tga"]
    assert extension_variants("x.png") == ["x.png"]


def reforged_folder(tmp_path):
    """Extracted Reforged data as a CASC tool writes it: the SD tree under war3.w3mod, the HD
    overrides under war3.w3mod/_hd.w3mod, textures only as .dds."""
    sd = tmp_path / "reforged" / "war3.w3mod"
    hd = sd / "_hd.w3mod"
    for folder, rgba in ((hd, GREEN), (sd, MAGENTA)):
        (folder / "Units" / "Human" / "Knight").mkdir(parents=True)
        (folder / "Units" / "Human" / "Knight" / "Knight.dds").write_bytes(dds(rgba))
        (folder / "Textures").mkdir()
        (folder / "Textures" / "Cape.dds").write_bytes(dds(rgba))
    return hd, sd


def test_tif_and_blp_paths_render_the_dds_of_reforged_data(tmp_path):
    hd, sd = reforged_folder(tmp_path)
    models = tmp_path / "models"
    models.mkdir()
    path = write_model(models, "knight", [layer(0), layer(0, texture=1)], {"a.tga": FILLER, "b.tga": FILLER},
                       [quad(y=-20, half=18), quad(y=20, half=18, material=1)])
    model = load_model(path)
    model.textures = [Texture(path="Units\\Human\\Knight\\Knight.tif"), Texture(path="Textures\\Cape.blp")]
    save_mdx(model, path)
    for name in ("a.tga", "b.tga"):
        (models / name).unlink()
    gl = renderer()
    model = load_model(path)
    spec = FrameSpec(width=64, height=64, camera=FRONT_CAMERA, background="#000000", game=(str(hd), str(sd)))
    frame = gl.render(model, spec)
    gl.forget(model)
    assert not frame.missing_assets
    found = {a["asked"]: a for a in frame.assets}
    assert found["Units\\Human\\Knight\\Knight.tif"]["found"].endswith("_hd.w3mod/Units/Human/Knight/Knight.dds")
    assert found["Textures\\Cape.blp"]["found"].endswith("_hd.w3mod/Textures/Cape.dds")
    rgba = frame.rgba.astype(int)
    for col in (16, 48):  # both quads are drawn with the HD tree's green, not the checker or the SD magenta
        r, g, b, _ = rgba[32, col]
        assert g > 150 and r < 60 and b < 60, (col, rgba[32, col])
    # without the game data the .tif stays missing, and says which extensions it tried
    bare = gl.render(load_model(path), FrameSpec(width=64, height=64, camera=FRONT_CAMERA, background="#000000"))
    assert any(a["asked"].endswith("Knight.tif") and ".dds, .blp, .tga, .tif" in a["why"]
               for a in bare.missing_assets), bare.missing_assets
    assert np.any(bare.rgba != frame.rgba)
