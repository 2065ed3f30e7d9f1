"""The RGBA image behind every texture of a model, ready to upload: files found under the asset
roots, team colour and glow for replaceable ids 1 and 2, other replaceable ids through the asset
roots, and a placeholder (plus a diagnostic) for anything missing. Never fails a frame.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

import numpy as np

from renderer.errors import Diagnostic, FormatError
from renderer.model import Model

# Replaceable ids other than team colour/glow, resolved through the asset roots (game layout).
REPLACEABLE_PATHS = {
    11: "ReplaceableTextures\\Cliff\\Cliff0.blp",
    31: "ReplaceableTextures\\LordaeronTree\\LordaeronSummerTree.blp",
    32: "ReplaceableTextures\\AshenvaleTree\\AshenTree.blp",
    33: "ReplaceableTextures\\BarrensTree\\BarrensTree.blp",
    34: "ReplaceableTextures\\NorthrendTree\\NorthTree.blp",
    35: "ReplaceableTextures\\Mushroom\\MushroomTree.blp",
    36: "ReplaceableTextures\\RuinsTree\\RuinsTree.blp",
    37: "ReplaceableTextures\\OutlandMushroomTree\\MushroomTree.blp",
}
MISSING_MODES = ("checker", "white")


def placeholder(mode: str) -> np.ndarray:
    """'checker': an 8x8 magenta/black checker, impossible to miss; 'white': opaque white."""
    if mode == "white":
        return np.full((1, 1, 4), 255, np.uint8)
    y, x = np.mgrid[0:8, 0:8]
    img = np.zeros((8, 8, 4), np.uint8)
    img[..., 3] = 255
    on = (x + y) % 2 == 0
    img[on, 0] = 255
    img[on, 2] = 255
    return img


@dataclass
class LoadedTexture:
    rgba: np.ndarray
    wrap_s: bool
    wrap_t: bool
    source: str  # file path, "team-color:N", "team-glow:N", "missing", ...
    mipmaps: str = "generate"  # renderer.formats.textures.mips: generate | stored | none
    levels: tuple = ()  # the stored levels 1.. when mipmaps == "stored"


@dataclass
class TextureSet:
    textures: list[LoadedTexture]
    diagnostics: list[Diagnostic] = field(default_factory=list)


@lru_cache(maxsize=256)
def _decode_file(path: str, mtime_ns: int, size: int):
    from renderer.formats.textures import decode_texture_chain

    chain = decode_texture_chain(Path(path).read_bytes(), path)
    for img in chain.levels:
        img.setflags(write=False)
    return chain


def decode_file(path: Path):
    """The file's `MipChain` (cached; its arrays are read-only)."""
    st = path.stat()
    return _decode_file(str(path), st.st_mtime_ns, st.st_size)


def load_textures(model: Model, asset_roots: list[Path] | tuple = (), team: int = 0,
                  missing: str = "checker") -> TextureSet:
    from renderer.formats.textures import TextureResolver, team_color_texture, team_glow_texture

    if missing not in MISSING_MODES:
        raise ValueError(f"missing-texture mode must be one of {MISSING_MODES}, got {missing!r}")
    model_dir = Path(model.path).parent if model.path else Path(".")
    resolver = TextureResolver([Path(r) for r in asset_roots], model_dir)
    out = TextureSet([])
    halo = model.format == "halo"
    for i, tex in enumerate(model.textures):
        wrap_s, wrap_t = bool(tex.flags & 1), bool(tex.flags & 2)
        where = f"texture {i}"
        if tex.replaceable_id == 1:
            out.textures.append(LoadedTexture(team_color_texture(team), wrap_s, wrap_t, f"team-color:{team}"))
            continue
        if tex.replaceable_id == 2:
            out.textures.append(LoadedTexture(team_glow_texture(team), wrap_s, wrap_t, f"team-glow:{team}"))
            continue
        if halo:
            from renderer.formats.halo import resolve_halo_bitmap

            rgba = resolve_halo_bitmap(model, i)  # adds its own diagnostics to the model
            if rgba is not None:
                out.textures.append(LoadedTexture(rgba, True, True, str(tex.path)))
                continue
        path = str(tex.path) or REPLACEABLE_PATHS.get(tex.replaceable_id, "")
        if not path:
            what = f"replaceable id {tex.replaceable_id}" if tex.replaceable_id else "an empty path"
            out.diagnostics.append(Diagnostic(where, None, f"{what} names no texture; drawing a {missing} placeholder"))
            out.textures.append(LoadedTexture(placeholder(missing), wrap_s, wrap_t, "missing"))
            continue
        found, notes = resolver.resolve(path)
        out.diagnostics.extend(notes)
        if found is None:
            out.diagnostics.append(Diagnostic(where, None, f"texture {path!r} was not found under the model's folder "
                                              f"or the asset roots; drawing a {missing} placeholder"))
            out.textures.append(LoadedTexture(placeholder(missing), wrap_s, wrap_t, "missing"))
            continue
        try:
            chain = decode_file(found)
        except (FormatError, OSError) as e:
            msg = e.sentence() if isinstance(e, FormatError) else str(e)
            out.diagnostics.append(Diagnostic(where, None, f"cannot decode {path!r}: {msg}; drawing a placeholder"))
            out.textures.append(LoadedTexture(placeholder(missing), wrap_s, wrap_t, "missing"))
            continue
        out.textures.append(LoadedTexture(chain.top, wrap_s, wrap_t, str(found), chain.mode, chain.levels[1:]))
    return out
