"""Mip chains: the levels a texture file stores, and whether the renderer uploads them
(`renderer.rules.TEXTURE_MIPMAPS` states the rule; this module applies it).

A `MipChain` is level 0 plus how the GPU gets the rest:

* `GENERATE`: the file stores no levels (TGA, PNG; Halo bitmaps and team colours too): the GPU
  builds them (glGenerateMipmap), as the viewer does for image files.
* `STORED`: levels 1.. are the file's own, uploaded as they are (the chain may stop before 1x1; the
  texture's max level is the last stored one).
* `NONE`: level 0 only, no mipmapping (linear minification): what the viewer does for a BLP with one
  level, with "fake" levels (two slots with the same offset, e.g. SmileyGW.blp) or with a side that
  is not a power of two, and for a DDS with one level.

Level k is max(1, w >> k) x max(1, h >> k). The stored chain stops at the first level that is
missing, cannot be decoded or has another size; what came before it is kept (no diagnostic: level 0
is what a frame needs, and the rest only changes minified pixels).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from renderer.errors import FormatError

GENERATE, STORED, NONE = "generate", "stored", "none"


@dataclass(frozen=True)
class MipChain:
    levels: tuple  # (H, W, 4) uint8 arrays, level 0 first
    mode: str  # GENERATE | STORED | NONE

    @property
    def top(self) -> np.ndarray:
        return self.levels[0]

    # What renderer.assets.cache.DecodeCache asks of what it caches (it was written for arrays).
    @property
    def nbytes(self) -> int:
        return sum(level.nbytes for level in self.levels)

    def setflags(self, write: bool) -> None:
        for level in self.levels:
            level.setflags(write=write)


def level_size(width: int, height: int, level: int) -> tuple[int, int]:
    return max(1, width >> level), max(1, height >> level)


def full_chain_length(width: int, height: int) -> int:
    """Levels from width x height down to 1x1."""
    return max(width, height).bit_length()


def is_power_of_two(n: int) -> bool:
    return n > 0 and n & (n - 1) == 0


def stored_chain(top: np.ndarray, count: int, decode_level: Callable[[int], np.ndarray]) -> MipChain:
    """The chain of a file that says it stores `count` levels; `decode_level(k)` decodes level k >= 1."""
    h, w = top.shape[:2]
    count = min(count, full_chain_length(w, h))
    levels = [top]
    for k in range(1, count):
        try:
            img = decode_level(k)
        except FormatError:
            break
        if img.shape[:2] != level_size(w, h, k)[::-1]:
            break
        levels.append(img)
    return MipChain(tuple(levels), STORED if len(levels) > 1 else NONE)
