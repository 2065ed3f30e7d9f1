"""Every rule where the public sources disagree or a renderer must choose, decided once and named here.

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

# ---- Particles and ribbons (renderer/fx) -------------------------------------------------------
# Emission-rate scale (§2.11): the viewer doubles KP2E ("particles high", matched by eye); HiveWE
# does not. We take the record at its word: particles per second = KP2E x 1. Ribbons likewise emit
# emissionRate edges per second.
PRE2_EMISSION_RATE_SCALE = 1.0
RIBBON_EMISSION_RATE_SCALE = 1.0

# Squirt (§2.11): "keys" = the viewer's rule made step-independent: each KP2E key of the playing
# sequence (or of its global sequence) adds its value, once, to the emission accumulator at every
# time the track's clock passes that key (each loop of a looping clock; once for a non-looping
# sequence). Without a KP2E key in the playing sequence, HiveWE's rule: the static rate is added at
# the sequence start and at every wrap. Squirt emitters never emit continuously.
PRE2_SQUIRT = "keys"

# Texture atlas interval end (§2.11): "inclusive", as HiveWE: an interval {start, end, repeat} shows
# the |end - start| + 1 cells start..end (counting down when end < start), `repeat` times over the
# segment; repeat 0 counts as 1; cells clamp to rows x columns - 1. Blizzard's own files partition
# their atlases this way (LargeFireEmitter: life {0, 31}, decay {32, 63} on 8 x 8 cells), which the
# viewer's exclusive end would leave cells 31 and 63 unused.
PRE2_ATLAS_END = "inclusive"

# PRE2 spawn direction: the viewer's rotation (+Z turned by Z 90 deg, then Y by U(-lat, lat), then X
# by U(-lat, lat) unless LineEmitter), not HiveWE's spherical (theta, phi) draw.
PRE2_DIRECTION = "viewer"

# PREM latitude / longitude (KPLT / KPLN) are radians (the viewer feeds them to rotations as they
# are). Direction = Rz(U(-longitude, longitude)) Ry(U(-latitude, latitude)) +Z, then the node's world
# rotation and scale. EmitterUsesTGA particles have no size field: camera-facing quads of this
# half-size (model units, times the emitter node's scale), white, blended as PRE2 Blend.
PREM_ANGLES = "radians"
PREM_TGA_HALF_SIZE = 8.0
