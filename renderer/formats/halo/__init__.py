"""Halo 1 model tags: Xbox `.model` (class `mode`, v4) and PC `.gbxmodel` (class `mod2`, v5).

Facts: ../shared/docs/halo-tags.md. Entry point: `read_halo_model(data, name, strict=False,
lod="super_high", permutation=None, regions=None, tag_root=NEAREST_TAG_ROOT, resolver=None)`,
registered for ".model" and ".gbxmodel" (a file: `renderer.formats.load(path, lod=...)`), and
`load_halo_model` (the same, returning the model and its texture source: the format's loader).
Modules: `tagfile` (header, bounded big-endian cursor, tag root), `model_tag` (every block of the
tag), `geometry` (compressed vertices, strips, node maths), `shaders`, `bitmap`,
`load` (the neutral model), `info` (`format_halo_info`).

How a model tag maps onto the neutral Model
===========================================

- `format` "halo"; `version` the tag version (4 or 5); `name` the file stem; `info` a JSON-ready dict
  (class, version, engine, checksum and whether it matched, flags, detail cutoffs, base map scale, LOD
  chosen, nodes with their default transforms, markers, regions with permutations and the chosen one,
  what was drawn, geometries with part/vertex/triangle counts, shaders and whether each resolved,
  textures). `format_halo_info(model.info, model.diagnostics)` renders it as text.
- Bind pose. Halo stores vertices in model space, already in the default pose (halo-tags.md §4.1).
  The loader keeps them as stored, so node matrices are identity at rest: drawing with no
  animation, or with every node's animation at identity, gives the correct model. Nodes become
  `Bone`s (object_id = node index, parent_id = the node's parent, flags 0x100, no tracks);
  `model.pivots[i]` is node i's default-pose origin in model space, as MDX pivots are. The default
  transforms stay recoverable in `info["nodes"]`: the stored local translation and quaternion
  (i, j, k, w as stored: the conjugate of the usual child-into-parent rotation) and the world matrix
  W = W[parent] · T(t) · R(q̄) (row-major 4x4, column vectors). An animation that poses the nodes
  at world matrices P skins with S[n] = P[n] · W[n]⁻¹.
- Each part of each drawn geometry is a `Geoset`: vertices and unit normals (uncompressed vertices
  when the part has them, else decoded compressed ones), `uv_sets[0]` = stored uv × the model's
  base map scale (0 means 1) × the shader's map scale (+ a transparent shader's map offset) when the
  shader tag was read, `tangents` (n, 4) with w = handedness from the binormal, triangle faces (one
  PTYP-4 group), `bone_indices` (n, 4) int32 = (node0, node1, 0, 0) as global node indices (local
  nodes mapped through the part's table), `bone_weights` (n, 4) float32 = (w0, w1, 0, 0) normalised to
  sum 1 (a missing second node gets weight 0), `material_id` = the shader's material,
  `selection_group` = region index, `lod`/`lod_name` = the LOD used.
- Winding. Strips become triangle lists with (s[k], s[k+2], s[k+1]) at even k and (s[k], s[k+1],
  s[k+2]) at odd k, skipping 0xFFFF padding and degenerate triangles without resetting the parity:
  counter-clockwise seen from outside, i.e. OpenGL's default glFrontFace(GL_CCW) with back-face culling.
- Shaders: material i is shader reference i, with one `Layer`; `Material.shader` is the shader tag
  path with its extension. The shader tag is looked up under the tag root (the `tag_root` option, else
  the nearest folder named "tags" above the model file), case-insensitively and never outside it.
  shader_model, shader_transparent_chicago and shader_transparent_generic tags are read; blend modes
  and flags are in `renderer.formats.halo.shaders` (shader_model: None, or Transparent when Halo
  alpha-tests it; chicago/generic: alpha blend -> Blend, add -> Additive, multiply -> Modulate,
  double multiply -> Modulate2x, alpha multiply add -> AddAlpha, ...).
- Textures: one `Texture` per distinct base map, path = the bitmap tag path + ".bitmap" relative to the
  tag root (e.g. "characters\\cyborg\\bitmaps\\cyborg.bitmap"), flags WrapWidth/WrapHeight unless the
  map clamps. When the shader tag or its base map is missing, unreadable or of a class we do not read,
  the material's texture is a flat colour: `Texture(replaceable_id=0, path="")`, its colour in
  `info["textures"][i]["flat_color"]` (`shaders.flat_color`: from crc32 of the lower-case shader path,
  each channel 64..223, alpha 255), plus a diagnostic. Out-of-range shader indices use one extra
  fallback material.
- Tags are found by the reader's resolver (renderer.formats' contract): a `TagRoot` over the tag
  root by default, or a worker's pinned answers (renderer.assets.pins); the bytes it found are kept
  in the texture source the load returns beside the model, so nothing reads the tag tree after it.
- The renderer gets pixels through the model's context's `texture_source` (`load.HaloBitmaps`, returned
  by `load_halo_model`, the format's loader; renderer.context), which
  renderer.texture_set asks before any file search): (H, W, 4) uint8 RGBA, row 0 = the top row,
  sampled with uv as stored (no V flip); the top mip level of the base map, or a 1x1 image of the
  flat colour. Decoded images are cached and read-only.
- Selection: `lod` super_high (default), high, medium, low, super_low (or 0..4), falling back to
  lower then higher detail when a permutation has no geometry there; `permutation` None (0 of every
  region), a name or index for every region that has it, or {region: permutation}; `regions` limits
  which regions are drawn. A geometry chosen twice is drawn once. Bad option values raise ValueError.
- Bad input: `FormatError(path, block, offset, problem)` for anything structural, every count checked
  against the remaining bytes first; header checksum mismatch, bytes after the last block, bad
  node/vertex/shader indices and missing shader or bitmap tags are diagnostics (`strict` raises).
"""

from .bitmap import decode_bitmap_tag, read_bitmap_tag
from .info import format_halo_info
from .load import TAG_KINDS, HaloBitmaps, load_halo_model, lod_index, read_halo_model
from .model_tag import LODS, read_model_tag
from .tagfile import TagRoot

__all__ = [
    "LODS",
    "TAG_KINDS",
    "HaloBitmaps",
    "decode_bitmap_tag",
    "format_halo_info",
    "load_halo_model",
    "lod_index",
    "read_bitmap_tag",
    "read_halo_model",
    "read_model_tag",
    "TagRoot",
]
