"""The texture format registry and `decode_texture`, which picks a decoder by the file's bytes.

Each format module registers itself on import (as Pillow's image plugins do); nothing here knows
the formats. Formats with a magic number are asked first, in registration order; formats without
one (TGA) register as fallbacks and are asked only when no magic matched.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from renderer.errors import FormatError
from renderer.formats.textures.mips import GENERATE, MipChain

Accept = Callable[[bytes, str], bool]
Decode = Callable[[bytes, str], np.ndarray]
DecodeChain = Callable[[bytes, str], MipChain]


@dataclass(frozen=True)
class TextureFormat:
    """One registered format: `accept(head, name)` looks at the first bytes (and, for fallbacks,
    the name); `decode(data, name)` returns the top mip level as RGBA or raises `FormatError`;
    `decode_chain(data, name)`, for formats that store mip levels, returns the `MipChain` to upload
    (without it: level 0, mipmaps generated)."""

    name: str
    accept: Accept
    decode: Decode
    fallback: bool = False
    decode_chain: DecodeChain | None = None


# How many leading bytes `accept` is shown: enough for any magic and a TGA header.
HEAD_BYTES = 32

_formats: list[TextureFormat] = []


def register_format(fmt: TextureFormat) -> None:
    """Add a format; registering a name again replaces the earlier entry in place."""
    for i, known in enumerate(_formats):
        if known.name == fmt.name:
            _formats[i] = fmt
            return
    _formats.append(fmt)


def registered_formats() -> list[str]:
    return [fmt.name for fmt in _formats]


def find_format(data: bytes, name: str) -> TextureFormat | None:
    head = bytes(data[:HEAD_BYTES])
    for fallback in (False, True):
        for fmt in _formats:
            if fmt.fallback == fallback and fmt.accept(head, name):
                return fmt
    return None


def _format_of(data: bytes, name: str) -> TextureFormat:
    if not data:
        raise FormatError(name, "texture", 0, "file is empty")
    fmt = find_format(data, name)
    if fmt is None:
        raise FormatError(
            name,
            "texture",
            0,
            f"unrecognised texture format (first bytes {data[:8]!r}); known formats: {', '.join(registered_formats())}",
        )
    return fmt


def _checked(fmt: TextureFormat, image: np.ndarray) -> np.ndarray:
    if image.dtype != np.uint8 or image.ndim != 3 or image.shape[2] != 4:
        raise AssertionError(f"{fmt.name} decoder returned {image.dtype} {image.shape}, not (H, W, 4) uint8")
    if not (image.flags.c_contiguous and image.flags.writeable and image.flags.owndata):
        image = np.array(image, dtype=np.uint8, order="C", copy=True)
    return image


def decode_texture_chain(data: bytes, name: str) -> MipChain:
    """Like `decode_texture`, with the mip levels the renderer uploads (`renderer.formats.textures.mips`)."""
    data, name = bytes(data), str(name)
    fmt = _format_of(data, name)
    if fmt.decode_chain is None:
        return MipChain((_checked(fmt, fmt.decode(data, name)),), GENERATE)
    chain = fmt.decode_chain(data, name)
    return MipChain(tuple(_checked(fmt, level) for level in chain.levels), chain.mode)


def decode_texture(data: bytes, name: str) -> np.ndarray:
    """Decode the top mip level of a texture file into a new (height, width, 4) uint8 RGBA array.

    Row 0 is the top of the image. `name` is the file's name or path, used to report errors and to
    recognise formats without a magic number (`.tga`). Raises `FormatError` for anything it cannot
    decode, naming the file, the field, the byte offset and the problem.
    """
    data = bytes(data)
    name = str(name)
    fmt = _format_of(data, name)
    return _checked(fmt, fmt.decode(data, name))
