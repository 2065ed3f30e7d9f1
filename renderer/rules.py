"""Every rule where the public sources disagree or a renderer must choose, decided once and named here.

See ../shared/docs/mdx-format.md section 2.11 for the format rules. Each constant names our choice;
tests pin them. Rules that change pixels and can be chosen per frame (lighting) are named, and the
frame's trace records the one that drew it (renderer/frame.py).
"""

import math
from dataclasses import dataclass

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

# Colour component order. MDX stores the GEOA static colour as R, G, B and KGAC track values as
# B, G, R (the net rule of the viewer, which swizzles the static colour into its BGR track order,
# and of HiveWE); PRE2 segment colours and RIBB colours are R, G, B (what the game shows). The model
# keeps the bytes' order; the renderer applies the swizzle (renderer/anim/pose.py). MDL text writes
# colours in the same component order as the MDX bytes, so conversion never reorders anything.
GEOA_STATIC_COLOR_BGR = False
GEOA_TRACK_COLOR_BGR = True

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

# ---- Lighting (renderer/gl/model_program.py, renderer/scene.py, renderer/fx/draw.py) ------------
# The light factor that multiplies the RGB of a shaded (not Unshaded) layer:
#     factor = min(ambient + diffuse x clamp(N . L, 0, 1), 1)
# N: the skinned vertex normal (interpolated); L: towards `vector` when `point` (a point light at
# `vector` in model space, so L varies across the model), else `vector` normalised (a directional
# light). `flip_back_faces`: a back-facing fragment uses -N.
#
# "viewer" (default, DESIGN.md "Conventions"): mdx-m3-viewer's SD shader, clamp(clamp(N.L, 0, 1) +
#   0.7, 0, 1) with its light at (0, 0, 10000), no flip; frames compare with what modellers see.
# "farm-v0": this farm's first rule, min(0.4 + 0.75 max(N.L, 0), 1) with the fixed direction
#   (0.3, -0.4, 0.866) and back faces lit through the flipped normal (opt-in, for old goldens).
#
# Neither is the game's: Warcraft III lights units and doodads from the map tileset's day/night
# models (Environment\DNC\DNC<Tileset>\DNC<Tileset>Unit and ...Terrain): an animated directional
# Light node whose colour, intensity and ambient colour/intensity follow the time of day (a 24 h
# sequence), plus fog. That depends on the map and the clock, which a model frame does not have.
@dataclass(frozen=True)
class LightingRule:
    name: str
    point: bool
    vector: tuple
    ambient: float
    diffuse: float
    flip_back_faces: bool

    def to_light(self, position=(0.0, 0.0, 0.0)) -> tuple:
        """The unit vector L at a model-space position."""
        v = [a - b for a, b in zip(self.vector, position, strict=True)] if self.point else list(self.vector)
        n = math.sqrt(sum(x * x for x in v)) or 1.0
        return tuple(x / n for x in v)

    def factor(self, normal, position=(0.0, 0.0, 0.0), front: bool = True) -> float:
        """The light factor for a unit normal at a position (what the shader computes)."""
        n = normal if front or not self.flip_back_faces else [-x for x in normal]
        d = sum(a * b for a, b in zip(n, self.to_light(position), strict=True))
        return min(self.ambient + self.diffuse * min(max(d, 0.0), 1.0), 1.0)

    def describe(self) -> str:
        """The rule as the trace records it: its name and every number that decides pixels."""
        where = "point" if self.point else "direction"
        v = ",".join(f"{x:g}" for x in self.vector)
        return (f"{self.name}: min({self.ambient:g} + {self.diffuse:g} clamp(N.L, 0, 1), 1), L {where} ({v}) "
                f"model space, back faces {'flipped' if self.flip_back_faces else 'not flipped'}")


LIGHTING_VIEWER = LightingRule("viewer", True, (0.0, 0.0, 10000.0), 0.7, 1.0, False)
LIGHTING_FARM_V0 = LightingRule("farm-v0", False, (0.3, -0.4, 0.866), 0.4, 0.75, True)
LIGHTING_RULES = {r.name: r for r in (LIGHTING_VIEWER, LIGHTING_FARM_V0)}
DEFAULT_LIGHTING = LIGHTING_VIEWER.name


def lighting_rule(name: str) -> LightingRule:
    """The rule named `name`; ValueError naming the known rules otherwise."""
    try:
        return LIGHTING_RULES[name]
    except KeyError:
        raise ValueError(f"lighting must be one of {sorted(LIGHTING_RULES)}, got {name!r}") from None

# ---- Model lights (LITE; renderer/lights.py, renderer/gl/model_program.py) -------------------
# Off by default (FrameSpec.lights = "off": the frame is drawn exactly as without this feature and
# its trace has no "lights" key). With lights = "model", the model's own Light nodes add to the
# lighting rule's factor, per pixel, for shaded (not Unshaded) layers, SD and HD alike:
#     rgb = texel x colour x (factor_rule + sum_i light_i)         (per channel; the framebuffer clamps)
# where factor_rule is the lighting rule's scalar factor above (white), and for light i at node world
# matrix M (the posed node hierarchy, renderer.anim pose), P = M @ pivot, d = |P - x|:
#   omni (0):        (C I clamp(N.L, 0, 1) + A AI) att(d),   L = normalize(P - x)
#   directional (1): C I clamp(N.L, 0, 1) + A AI,            L = -normalize(M3 @ LIGHT_DIRECTION_LOCAL)
#   ambient (2):     A AI att(d)
# C, I: KLAC colour and KLAI intensity; A, AI: KLBC ambient colour and KLBI ambient intensity; the
# attenuation is linear between KLAS (start) and KLAE (end):
#   att(d) = 1 for d <= start, (end - d) / (end - start) between, 0 for d >= end (and when end <= start:
#   1 for d <= end, else 0). Nothing is added past attenuation end.
# N is the shaded normal (the HD normal map's for HD layers), turned on back faces when the lighting
# rule flips them; model lights add no specular term.
# A light whose KLAV visibility is <= 0 (renderer.anim.pose.VISIBILITY_THRESHOLD) adds nothing.
# Our choices (the format doc lists no renderer that shades with LITE but Warsmash, not verified
# here): the linear falloff; the directional light shining along the node's local -Z (an unrotated
# one lights from above, like the game's DNC sun, whose nodes are rotated); the ambient term of omni
# lights attenuated like their diffuse term; no clamp before the framebuffer's.
# Colour order: as GEOA (section 2.11: MDX static colours R, G, B, colour tracks B, G, R): the static
# colour / ambient colour are R, G, B and KLAC / KLBC track values B, G, R.
LIGHT_STATIC_COLOR_BGR = False
LIGHT_TRACK_COLOR_BGR = True
LIGHT_DIRECTION_LOCAL = (0.0, 0.0, -1.0)
# At most this many lights shade one draw: the first MAX_MODEL_LIGHTS of model.lights in file order
# (visible or not, so the set does not change along a sequence); the rest are dropped with a diagnostic.
MAX_MODEL_LIGHTS = 8
LIGHTS_MODES = ("off", "model")
# EVTS event visuals (renderer.fx.events): "off" by default. What they draw comes from the game's SLK
# tables, which a run finds only when game data (or the tables) are among its assets: with "model" by
# default, every frame of a model with events would change the day game data is added to a job, and
# regression runs that predate event visuals would fail. A job asks for them with events = "model".
EVENTS_MODES = ("off", "model")
LIGHT_RULE = (f"lights-v1: model LITE nodes (max {MAX_MODEL_LIGHTS}, file order) added to the lighting rule's "
              "factor per channel; omni (C I clamp(N.L,0,1) + A AI) att, directional C I clamp(N.L,0,1) + A AI "
              "(local -Z), ambient A AI att; att linear from KLAS to KLAE; KLAV <= 0 off; static colours RGB, "
              "KLAC/KLBC BGR")


def _check_mode(what: str, mode: str, modes: tuple) -> str:
    if mode not in modes:
        raise ValueError(f"{what} must be one of {list(modes)}, got {mode!r}")
    return mode


def check_lights(mode: str) -> str:
    """`mode` when it is a known lights mode; ValueError naming them otherwise."""
    return _check_mode("lights", mode, LIGHTS_MODES)


def check_events(mode: str) -> str:
    """`mode` when it is a known event-visuals mode; ValueError naming them otherwise."""
    return _check_mode("events", mode, EVENTS_MODES)


def light_attenuation(distance: float, start: float, end: float) -> float:
    """The attenuation factor of an omni or ambient light at `distance` (see above)."""
    if end <= start:
        return 1.0 if distance <= end else 0.0
    if distance <= start:
        return 1.0
    if distance >= end:
        return 0.0
    return (end - distance) / (end - start)


# ---- Texture mip levels (renderer/formats/textures/mips.py applies it, renderer/gl uploads) ----
# "stored": BLP and DDS files upload their own stored levels (to the last stored one) when they
# have more than one; a BLP with one level, with "fake" levels (two slots sharing an offset) or a
# side that is not a power of two, and a DDS with one level, are drawn without mipmapping (linear
# minification), as the viewer does; no diagnostic. Files that store no levels (TGA, PNG), Halo
# bitmaps (top level decoded) and team colours get GPU-generated mipmaps (the viewer does the same
# for image files).
TEXTURE_MIPMAPS = "stored"

# ---- Reforged HD materials (renderer/hd.py picks the slots, renderer/gl/model_program.py shades) --
# A material is HD when its shader is "Shader_HD_DefaultUnit" (900 / 1000: layers 0..5 are the six
# slots, the first layer's filter mode and flags decide blending) or, from 1100, per layer with
# shaderTypeId 1 (its texture slots 0..5). Slots, in order:
HD_SLOTS = ("diffuse", "normal", "orm", "emissive", "team_color", "environment")
# A slot with no texture, or whose texture is missing, binds this RGBA constant instead (the diffuse
# slot keeps the frame's missing-texture placeholder, so a missing diffuse is still noticed):
# a flat normal, ORM = (occlusion 1, roughness 1, metallic 0, team mask 0), emissive black (adds
# nothing, like the game's Textures\Black32.blp), team colour white, environment mid grey.
HD_NEUTRAL = {
    "normal": (128, 128, 255, 255), "orm": (255, 255, 0, 0), "emissive": (0, 0, 0, 255),
    "team_color": (255, 255, 255, 255), "environment": (128, 128, 128, 255),
}
# The shading, per fragment (N, T from the skinned normal and TANG tangent, B = cross(N, T) * w):
# * normal: n = (2 x.r - 1, 2 x.g - 1, sqrt(1 - r^2 - g^2)) in tangent space (the map's blue is not
#   read), N' = normalize(T n.x + B n.y + N n.z).
# * albedo = diffuse.rgb x geoset colour; team: albedo = mix(albedo, albedo x team.rgb, ORM.a).
# * diffuse light: albedo x the frame's lighting rule evaluated with N' x ORM.r (occlusion).
# * specular (ORM.g roughness r, ORM.b metallic m): Cook-Torrance GGX, alpha = r^2, Schlick Fresnel
#   with F0 = mix(0.04, albedo, m), Smith-Schlick geometry k = (r + 1)^2 / 8, light colour 1, L as
#   the lighting rule's, V towards the camera; added.
# * environment: env.rgb at the reflection of -V about N' (equirectangular: u = atan(y, x) / 2pi +
#   0.5, v = acos(z) / pi), times Schlick(N'.V, F0) x (1 - r); added.
# * emissive: emissive.rgb x the layer's emissive gain (KMTE); added. Unshaded layers skip the
#   lighting, specular and environment terms (albedo + emissive).
# Where the references disagree and what we chose (viewer = mdx-m3-viewer's hd.frag/hd.vert,
# HiveWE = skinned_mesh_hd.frag; Retera's Model Studio was not checked for this rule):
# * Lighting: the viewer and HiveWE both use clamp(N'.L + 0.1, 0, 1) (no ambient term); we keep the
#   frame's lighting rule, so SD and HD parts of one frame are lit alike.
# * Team colour: the viewer multiplies by team x ORM.a wherever ORM.a > 0.1 (darkening texels at the
#   mask's edge); HiveWE mixes towards albedo x team-texture.r x team colour by ORM.a; we mix by
#   ORM.a towards albedo x the team-colour slot's texture (the frame's team colour).
# * Specular: neither computes one; we add the GGX term above from ORM roughness / metallic, and
#   ORM occlusion darkens the diffuse term (neither reads ORM.r).
# * Environment: the current viewer and HiveWE do not sample it (an older viewer version samples it
#   by the normal); we sample it by the reflection vector, only when the texture was found.
# * Emissive: all add emissive.rgb; we also scale it by the layer's emissive gain.
# * Tangents: both use TANG; without TANG we generate tangents from the UVs (renderer/tangents.py).
HD_TANGENTS = "tang, else generated from uv set 0"

# ---- The render rules a frame's trace records (renderer/frame.py) ------------------------------
# One versioned line naming every fixed rule above that decides pixels and is not per frame.
RENDER_RULE = (f"render-v2: mipmaps {TEXTURE_MIPMAPS}; GEOA static {'BGR' if GEOA_STATIC_COLOR_BGR else 'RGB'}, "
               f"KGAC {'BGR' if GEOA_TRACK_COLOR_BGR else 'RGB'}; HD slots {'/'.join(HD_SLOTS)}, GGX specular, "
               f"tangents {HD_TANGENTS}")
