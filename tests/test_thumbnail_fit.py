"""Thumbnails that show the model (issue 33, item 8): the ``fit`` camera (renderer.camera.FIT_RULE, the
thumbnails' default) holds every live particle's whole quad, a soft particle included, and a character
fills most of the tile. Measured on rendered tiles: the real GL renderer, the thumbnails' own settings
(farm.thumbs.run.ThumbnailOptions: 4x MSAA, the fit camera, transparent background), their sequence and
time (farm.thumbs.work.choose_sequence, farm.look.default_time), at 128 pixels to stay cheap.

* A particle model's tile has no pixel with alpha > 0 on its outer 1-pixel border.
* A character's fill, its alpha bounding box's larger side over the tile's shorter side (the tile is
  square: the model's extent along the tile's side it fills most), is at least 65%.

The corpus tests skip without ../shared/corpus; the sample tests (renderer/samples) run in any clone.
"""

from __future__ import annotations

import numpy as np
import pytest
from conftest import CORPUS
from render_util import renderer

from farm.look import default_time
from farm.thumbs.run import ThumbnailOptions
from farm.thumbs.work import choose_sequence
from renderer.camera import FIT_MARGIN, look_at
from renderer.formats import FormatError, load, load_model
from renderer.framing import quad_corners
from renderer.fx import pre2
from renderer.model import Extent
from renderer.samples import write_samples
from renderer.samples.build import crate, effects

pytestmark = pytest.mark.filterwarnings("ignore")
SIZE = 128
MIN_FILL = 0.65
MODEL_PATTERNS = ("*.mdx", "*.mdl", "*.gbxmodel")
# What the character rule picks in the corpus today (each must still be picked while it is there):
# WC3 units with bones, geosets and a Walk sequence, and the Halo bodies (tags/characters/X/X.gbxmodel).
CHARACTERS = (
    "Retera__ReterasModelStudio/HayatesCharacterEngine/mesh/characters/human.mdl",
    "Retera__ReterasModelStudio/MDXLib/PackHorse.mdl",
    "Retera__ReterasModelStudio/MDXLib/PackHorse.mdx",
    "flowtsohg__mdx-m3-viewer/clients/example/resources/SmileyGW_004.mdx",
    "nazarpunk__wc3-map-edemium-legacy/map/Jack3.mdx",
    "nazarpunk__wc3-map-edemium-legacy/map/war3mapImported/Ghost.mdx",
    "pqhuy98__Warcraft3/icecrown-citadel-old/maps/icecrown-citadel.w3x/OrcMale.mdx",
    "pqhuy98__Warcraft3/silverpine-forest/maps/silverpine.w3x/Models/DarionMograineEvil/DarionMograineEvil.mdx",
    "pqhuy98__Warcraft3/silverpine-forest/maps/silverpine.w3x/Models/HarvestGolem/HarvestGolem.mdx",
    "pqhuy98__Warcraft3/silverpine-forest/maps/silverpine.w3x/Models/VillagersReReforged/Girl2.mdx",
    "aLTis94__Halo-CE-Monaco/tags/characters/cyborg/cyborg.gbxmodel",
    "aLTis94__Halo-CE-Monaco/tags/characters/marine/marine.gbxmodel",
    "halo/aLTis94__Halo-CE-Monaco/tags/characters/cyborg/cyborg.gbxmodel",
)
# Particle models (PRE2 or PREM emitters) in the corpus today, TeamcolorWispShimmer the one fit-v1 clipped.
PARTICLE_MODELS_AT_LEAST = 12


def thumbnail(model, assets=(), context=None, **settings) -> np.ndarray:
    """The RGBA tile `farm thumbnails --size 128` draws of `model` (its sequence, time and settings;
    `context`: the one its loader returned, a Halo model's bitmaps)."""
    seq, _ = choose_sequence(model, None)
    rs = ThumbnailOptions(size=SIZE).settings(tuple(map(str, assets)))
    spec = (rs.replace(**settings) if settings else rs).frame_spec(seq, default_time(model, seq))
    r = renderer()
    try:
        return r.render(model, spec, context=context).rgba
    finally:
        r.forget(model)


def on_border(rgba) -> int:
    """How many pixels of the tile's outer 1-pixel border are not fully transparent."""
    a = rgba[..., 3] > 0
    return int(a[0].sum() + a[-1].sum() + a[1:-1, 0].sum() + a[1:-1, -1].sum())


def fill(rgba) -> float:
    """The alpha bounding box's larger side over the tile's shorter side (0 for an empty tile)."""
    ys, xs = np.nonzero(rgba[..., 3] > 0)
    if not len(xs):
        return 0.0
    return max(int(xs.max() - xs.min()) + 1, int(ys.max() - ys.min()) + 1) / min(rgba.shape[:2])


def is_character(rel: str, model) -> bool:
    """A unit that walks (bones, geosets, a Walk sequence), or a Halo body tag (characters/X/X.gbxmodel)."""
    parts = rel.split("/")
    if rel.endswith(".gbxmodel") and len(parts) >= 3 and parts[-3] == "characters":
        return parts[-2] == parts[-1].rsplit(".", 1)[0]
    walks = any(str(s.name).strip().lower().startswith("walk") for s in model.sequences)
    return bool(model.bones and model.geosets and walks)


def has_particles(model) -> bool:
    return bool(model.particle_emitters2 or model.particle_emitters)


@pytest.fixture(scope="module")
def corpus_tiles():
    """rel -> (model, tile) of every corpus model that loads; skipped without the corpus."""
    if not CORPUS.is_dir():
        pytest.skip("../shared/corpus is not present")
    out = {}
    for path in sorted({p for pat in MODEL_PATTERNS for p in CORPUS.rglob(pat)}):
        try:
            model, context = load(path)
        except FormatError:
            continue  # the corpus's negative fixtures
        out[path.relative_to(CORPUS).as_posix()] = (model, thumbnail(model, [path.parent], context=context))
    return out


def test_no_particle_model_touches_the_tile_edge(corpus_tiles):
    particles = {rel: tile for rel, (model, tile) in corpus_tiles.items() if has_particles(model)}
    assert len(particles) >= PARTICLE_MODELS_AT_LEAST, sorted(particles)
    figures = {rel: on_border(tile) for rel, tile in particles.items()}
    touching = {rel: n for rel, n in figures.items() if n}
    assert not touching, f"border pixels with alpha > 0 (of {4 * SIZE - 4}): {touching}"


def test_characters_fill_the_tile(corpus_tiles):
    picked = {rel for rel, (model, _) in corpus_tiles.items() if is_character(rel, model)}
    assert {rel for rel in CHARACTERS if (CORPUS / rel).exists()} <= picked
    figures = {rel: round(fill(corpus_tiles[rel][1]), 3) for rel in sorted(picked)}
    small = {rel: f for rel, f in figures.items() if f < MIN_FILL}
    assert not small, f"characters filling less than {MIN_FILL:.0%} of the tile: {small} (all: {figures})"
    assert all(on_border(corpus_tiles[rel][1]) == 0 for rel in picked)


# Without the corpus: the project's own samples.

def _tails():
    """The effects sample's flame and smoke alone, drawn as tails (a quad from the head back along the
    velocity, twice its length): what fit-v1, counting centres +- half-size, left out of the frame."""
    model, _ = effects()
    model.geosets, model.ribbon_emitters, model.helpers = [], [], []
    model.pivots = model.pivots[:3]
    for e in model.particle_emitters2:
        e.head_or_tail, e.tail_length = 1, 2.0
    model.extent = Extent(2000.0, (-1000.0, -1000.0, 0.0), (1000.0, 1000.0, 2000.0))
    return model


@pytest.mark.parametrize("time_ms", [None, 400, 1100, 2900])
def test_every_particle_quad_of_the_samples_is_inside_the_tile(time_ms):
    """White placeholders draw each particle's whole quad opaque, so the tile shows its full extent;
    at the thumbnail's time (None: the middle of Stand) and at others an animated thumbnail draws."""
    for model in (_tails(), effects()[0]):
        seq, _ = choose_sequence(model, None)
        rs = ThumbnailOptions(size=SIZE).settings().replace(missing_textures="white")
        t = default_time(model, seq) if time_ms is None else time_ms
        tile = renderer().render(model, rs.frame_spec(seq, t)).rgba
        renderer().forget(model)
        assert on_border(tile) == 0 and fill(tile) >= MIN_FILL, (model.name, t, on_border(tile), fill(tile))


def test_the_samples_fill_their_tiles(tmp_path):
    """The samples as written (textures found): the crate, a stand-in for a character, and the effects."""
    for path in write_samples(tmp_path):
        model = load_model(path)
        tile = thumbnail(model, [tmp_path])
        assert on_border(tile) == 0, path.name
        if path.stem in ("crate", "effects"):
            assert fill(tile) >= MIN_FILL, (path.name, fill(tile))


def test_quad_corners_are_where_the_particle_shader_puts_them():
    view = look_at((300.0, 100.0, 80.0), (0.0, 0.0, 20.0))
    right, up = view[0, :3], view[1, :3]
    inst = np.zeros((3, pre2.INSTANCE_FLOATS))
    inst[:, 0:3] = [[1.0, 2.0, 3.0], [0.0, 0.0, 0.0], [5.0, 0.0, 0.0]]
    inst[:, 14] = [10.0, 4.0, 2.0]
    inst[0, 15] = pre2.KIND_BILLBOARD
    inst[1, 3:6], inst[1, 15] = [0.0, 1.0, 0.0], pre2.KIND_XY  # an XY quad turned 90 degrees
    inst[2, 3:6], inst[2, 15] = [30.0, 0.0, 0.0], pre2.KIND_TAIL_XY  # a tail 30 long along X, flat in XY
    c = quad_corners(inst, view).reshape(3, 4, 3)
    assert np.allclose(c[0], [1.0, 2.0, 3.0] + 10.0 * np.array([-right - up, right - up, -right + up, right + up]))
    assert np.allclose(np.sort(c[1][:, :2], axis=0), [[-4, -4], [-4, -4], [4, 4], [4, 4]])
    assert np.allclose(c[1][:, 2], 0)
    assert np.allclose(sorted(c[2][:, 0]), [5, 5, 35, 35]) and np.allclose(np.abs(c[2][:, 1]), 2)
    assert np.allclose(c[2][:, 2], 0)


def test_fit_leaves_the_margin_it_names():
    """The crate's posed box fills FIT_MARGIN of the tile along its binding axis, within a pixel or two."""
    model, _ = crate()
    tile = thumbnail(model, missing_textures="white")
    assert abs(fill(tile) - FIT_MARGIN) <= 2.5 / SIZE, fill(tile)
