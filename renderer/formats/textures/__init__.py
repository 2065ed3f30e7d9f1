"""Textures without GL: decoding texture files to RGBA arrays, resolving a model's texture paths
under the asset roots, and the team colour / team glow replaceable textures.

`decode_texture(data, name)` picks a decoder by the file's bytes; each format module (blp, dds,
png, tga) registers itself when imported below, so adding a format is adding a module.
"""

from renderer.formats.textures import blp, dds, png, tga  # noqa: F401  (each registers itself)
from renderer.formats.textures.mips import MipChain
from renderer.formats.textures.reader import MAX_DIMENSION, MAX_PIXELS
from renderer.formats.textures.registry import (
    TextureFormat,
    decode_texture,
    decode_texture_chain,
    register_format,
    registered_formats,
)
from renderer.formats.textures.resolve import TextureResolver
from renderer.formats.textures.team import (
    TEAM_COLORS,
    team_color,
    team_color_texture,
    team_glow_texture,
)

__all__ = [
    "MAX_DIMENSION",
    "MAX_PIXELS",
    "MipChain",
    "TEAM_COLORS",
    "TextureFormat",
    "TextureResolver",
    "decode_texture",
    "decode_texture_chain",
    "register_format",
    "registered_formats",
    "team_color",
    "team_color_texture",
    "team_glow_texture",
]
