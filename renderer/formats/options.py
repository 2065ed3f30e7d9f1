"""Every point where the public MDX sources disagree, decided once and named here.

See ../shared/docs/mdx-format.md section 2.11. Each constant names our choice; tests pin them.
"""

# Node flags 0x2 / 0x4. We follow the GhostWolf specification, HiveWE and war3-model:
# 0x2 = DontInheritRotation, 0x4 = DontInheritScaling (the viewer and RMS swap them).
NODE_FLAG_DONT_INHERIT_TRANSLATION = 0x1
NODE_FLAG_DONT_INHERIT_ROTATION = 0x2
NODE_FLAG_DONT_INHERIT_SCALING = 0x4

# PRE2 fields at N+24 / N+28 are "length" (track KP2N) and "width" (track KP2W), as the
# specification, HiveWE, RMS and the wc3 crate name them. In MDL they are written `Length` and
# `Width`. Spawn area: length along the emitter's local X, width along local Y (viewer and RMS).
PRE2_FIELD_NAMES = ("length", "width")

# Layer fresnel fields (fresnelColor, fresnelOpacity, fresnelTeamColor) in version 900 files:
# sources disagree (present for every version > 800, or only from 1000). Version 900 has an
# inclusive layer size, so we detect it per layer: "auto" reads the fields when the bytes left in
# the layer after emissiveGain hold them and do not start with a track tag.
FRESNEL_IN_V900 = "auto"

# PRE2 filter modes. A value outside 0..4 loads as Blend (0) with a diagnostic.
PRE2_FILTER_MODES = ("Blend", "Additive", "Modulate", "Modulate2x", "AlphaKey")
PRE2_INVALID_FILTER_MODE = 0

# Colour component order. MDX stores GEOA colours (static and KGAC) as B, G, R; PRE2 segment
# colours and RIBB colours as R, G, B (what the game shows). The model keeps the bytes' order; the
# renderer applies the swizzle. MDL text writes colours in the same component order as the MDX
# bytes, so conversion never reorders anything.
GEOA_COLOR_BGR = True

# Layer filter modes (material layers).
LAYER_FILTER_MODES = ("None", "Transparent", "Blend", "Additive", "AddAlpha", "Modulate", "Modulate2x")

# Newest MDX version whose layouts we know. Newer files load what is known and keep the rest.
NEWEST_KNOWN_VERSION = 1200
