"""Blend, depth and alpha-test state for every material layer filter mode and PRE2 filter mode.

Pure data, no GL: the GL layer maps these names to enums. One explicit table per format, never
enum ordinals used as indices into another table.

Layer filter modes (MDX 0..6):
  None        opaque; depth write
  Transparent opaque with alpha test: discard alpha < 0.75; depth write
  Blend       src*a + dst*(1-a)
  Additive    src*a + dst
  AddAlpha    src*a + dst (as Additive)
  Modulate    dst*src  (ZERO, SRC_COLOR); discard alpha < 0.02
  Modulate2x  dst*src + src*dst = 2*src*dst (DST_COLOR, SRC_COLOR); discard alpha < 0.02
Only None and Transparent write depth. Output alpha (for transparent backgrounds): opaque modes
write 1; Blend composites alpha over (ONE, ONE_MINUS_SRC_ALPHA); Additive/AddAlpha add it
(ONE, ONE); Modulate modes leave the destination alpha unchanged (ZERO, ONE).

PRE2 filter modes (0..4): Blend, Additive, Modulate, Modulate2x, AlphaKey (alpha test 0.75,
blended like Blend). An invalid value draws as Blend.
"""

from __future__ import annotations

from dataclasses import dataclass

from renderer import rules


@dataclass(frozen=True)
class BlendState:
    name: str
    blend: tuple | None  # (src_rgb, dst_rgb, src_alpha, dst_alpha) factor names, None = no blending
    depth_write: bool
    alpha_test: float  # discard fragments with alpha below this (0 = never)
    opaque: bool  # drawn in the opaque pass


LAYER_STATES = (
    BlendState("None", None, True, 0.0, True),
    BlendState("Transparent", None, True, 0.75, True),
    BlendState("Blend", ("SRC_ALPHA", "ONE_MINUS_SRC_ALPHA", "ONE", "ONE_MINUS_SRC_ALPHA"), False, 0.0, False),
    BlendState("Additive", ("SRC_ALPHA", "ONE", "ONE", "ONE"), False, 0.0, False),
    BlendState("AddAlpha", ("SRC_ALPHA", "ONE", "ONE", "ONE"), False, 0.0, False),
    BlendState("Modulate", ("ZERO", "SRC_COLOR", "ZERO", "ONE"), False, 0.02, False),
    BlendState("Modulate2x", ("DST_COLOR", "SRC_COLOR", "ZERO", "ONE"), False, 0.02, False),
)

PARTICLE_STATES = (
    BlendState("Blend", ("SRC_ALPHA", "ONE_MINUS_SRC_ALPHA", "ONE", "ONE_MINUS_SRC_ALPHA"), False, 0.0, False),
    BlendState("Additive", ("SRC_ALPHA", "ONE", "ONE", "ONE"), False, 0.0, False),
    BlendState("Modulate", ("ZERO", "SRC_COLOR", "ZERO", "ONE"), False, 0.02, False),
    BlendState("Modulate2x", ("DST_COLOR", "SRC_COLOR", "ZERO", "ONE"), False, 0.02, False),
    BlendState("AlphaKey", ("SRC_ALPHA", "ONE_MINUS_SRC_ALPHA", "ONE", "ONE_MINUS_SRC_ALPHA"), False, 0.75, False),
)
assert tuple(s.name for s in PARTICLE_STATES) == rules.PRE2_FILTER_MODES
assert tuple(s.name for s in LAYER_STATES) == rules.LAYER_FILTER_MODES


def layer_state(filter_mode: int) -> BlendState:
    """Material layer filter mode -> state. Out-of-range values draw as None (opaque)."""
    return LAYER_STATES[filter_mode] if 0 <= filter_mode < len(LAYER_STATES) else LAYER_STATES[0]


def particle_state(filter_mode: int) -> BlendState:
    """PRE2 filter mode -> state; the one conversion from the MDX value. Invalid -> Blend."""
    if 0 <= filter_mode < len(PARTICLE_STATES):
        return PARTICLE_STATES[filter_mode]
    return PARTICLE_STATES[rules.PRE2_INVALID_FILTER_MODE]


# Layer shading flags.
UNSHADED, SPHERE_ENV_MAP, TWO_SIDED, UNFOGGED, NO_DEPTH_TEST, NO_DEPTH_SET = 0x1, 0x2, 0x10, 0x20, 0x40, 0x80
