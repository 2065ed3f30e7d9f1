"""Bounded reads over a texture file's bytes, and the size limits every decoder shares.

Every decoder reads its header through `TextureBytes`, so a short file, a field past the end or a
dimension over the limits becomes a `FormatError` naming the file, the field, its byte offset and the
problem, never an `IndexError`, a `struct.error` or a huge allocation.
"""

from __future__ import annotations

import struct

from renderer.errors import FormatError

# One side of a texture. WC3 and Reforged textures are at most 4096 (BLP allows 65535); anything
# past this is treated as corruption rather than allocated.
MAX_DIMENSION = 16384
# Pixels in one decoded image: 64 Mi pixels = 256 MiB of RGBA. Bounds formats whose pixel data is
# compressed by a general-purpose codec (PNG, JPEG, TGA RLE), where the byte count proves nothing.
MAX_PIXELS = 8192 * 8192


class TextureBytes:
    """The bytes of one texture file plus its name, for reads that cannot run past the end."""

    def __init__(self, data: bytes, path: str, format_name: str):
        self.data = bytes(data)
        self.path = str(path)
        self.format_name = format_name

    def __len__(self) -> int:
        return len(self.data)

    def error(self, field: str, offset: int | None, problem: str) -> FormatError:
        """A `FormatError` for this file; `field` is prefixed with the format name."""
        return FormatError(self.path, f"{self.format_name} {field}", offset, problem)

    def need(self, offset: int, size: int, field: str) -> None:
        """Raise unless `size` bytes from `offset` are present."""
        if offset < 0 or size < 0 or offset + size > len(self.data):
            have = max(0, len(self.data) - max(offset, 0))
            raise self.error(field, offset, f"needs {size} bytes but the file has {have} left")

    def take(self, offset: int, size: int, field: str) -> bytes:
        self.need(offset, size, field)
        return self.data[offset : offset + size]

    def unpack(self, fmt: str, offset: int, field: str) -> tuple:
        self.need(offset, struct.calcsize(fmt), field)
        return struct.unpack_from(fmt, self.data, offset)

    def u8(self, offset: int, field: str) -> int:
        return self.unpack("<B", offset, field)[0]

    def u32(self, offset: int, field: str) -> int:
        return self.unpack("<I", offset, field)[0]

    def check_dimensions(self, width: int, height: int, field: str, offset: int | None) -> None:
        """Raise unless width x height is a non-empty image within the shared limits."""
        if width <= 0 or height <= 0:
            raise self.error(field, offset, f"image is {width}x{height}; both sides must be at least 1")
        if width > MAX_DIMENSION or height > MAX_DIMENSION:
            raise self.error(field, offset, f"image is {width}x{height}; a side over {MAX_DIMENSION} is refused")
        if width * height > MAX_PIXELS:
            raise self.error(field, offset, f"image is {width}x{height}; more than {MAX_PIXELS} pixels is refused")
