"""The GLSL program that draws geoset layers: palette skinning, one UV set, lit or unshaded.

Skinning: every vertex carries 4 palette indices and 4 weights; the palette is a texture buffer
of affine matrices (3 RGBA32F texels each: the matrix's first three rows). Position and normal
are transformed by the weighted sum of the matrices; the normal is renormalised. A vertex whose
weights sum to 0 is left in its bind position.

Lighting: the frame's named `renderer.rules.LightingRule` (point or directional light, ambient,
diffuse, back-face flip), set by `set_lighting`; Unshaded layers skip it. Fog is off.
"""

from __future__ import annotations

import numpy as np

from .shaders import build_program

# The light loop's bound (renderer.rules.MAX_MODEL_LIGHTS; renderer.gl does not import the rest of
# the renderer, so tests/test_model_lights.py checks the two agree).
MAX_LIGHTS = 8

VERTEX = """
#version 330 core
layout(location = 0) in vec3 a_position;
layout(location = 1) in vec3 a_normal;
layout(location = 2) in vec4 a_bones;
layout(location = 3) in vec4 a_weights;
layout(location = 4) in vec2 a_uv;
layout(location = 5) in vec4 a_tangent;  // TANG (xyz, handedness w); HD materials only

uniform samplerBuffer u_palette;
uniform int u_palette_offset;
uniform mat4 u_view;
uniform mat4 u_projection;
uniform mat3 u_uv_matrix;
uniform int u_sphere_env;

out vec3 v_normal;
out vec2 v_uv;
out vec3 v_world;  // skinned world position (read back by transform feedback in tests)
out vec4 v_tangent;

mat4 bone(float index) {
    int base = (u_palette_offset + int(index + 0.5)) * 3;
    vec4 r0 = texelFetch(u_palette, base);
    vec4 r1 = texelFetch(u_palette, base + 1);
    vec4 r2 = texelFetch(u_palette, base + 2);
    return transpose(mat4(r0, r1, r2, vec4(0.0, 0.0, 0.0, 1.0)));
}

void main() {
    mat4 m = mat4(0.0);
    if (a_weights.x > 0.0) m += bone(a_bones.x) * a_weights.x;
    if (a_weights.y > 0.0) m += bone(a_bones.y) * a_weights.y;
    if (a_weights.z > 0.0) m += bone(a_bones.z) * a_weights.z;
    if (a_weights.w > 0.0) m += bone(a_bones.w) * a_weights.w;
    if (dot(a_weights, vec4(1.0)) <= 0.0) m = mat4(1.0);
    vec4 world = m * vec4(a_position, 1.0);
    v_world = world.xyz;
    vec3 n = mat3(m) * a_normal;
    float len = length(n);
    v_normal = len > 0.0 ? n / len : vec3(0.0, 0.0, 1.0);
    vec3 t = mat3(m) * a_tangent.xyz;
    v_tangent = vec4(length(t) > 0.0 ? normalize(t) : vec3(1.0, 0.0, 0.0), a_tangent.w < 0.0 ? -1.0 : 1.0);
    if (u_sphere_env != 0) {
        vec3 vn = normalize(mat3(u_view) * v_normal);
        v_uv = vn.xy * 0.5 + 0.5;
    } else {
        v_uv = (u_uv_matrix * vec3(a_uv, 1.0)).xy;
    }
    gl_Position = u_projection * (u_view * vec4(world.xyz, 1.0));
}
"""

FRAGMENT = """
#version 330 core
in vec3 v_normal;
in vec2 v_uv;
in vec3 v_world;
in vec4 v_tangent;

uniform sampler2D u_texture;
uniform vec4 u_color;
uniform float u_alpha_test;  // ALPHA_TEST variants only
uniform int u_opaque;
uniform vec3 u_light_vector;  // a model-space point (u_light_point != 0) or a unit direction
uniform int u_light_point;
uniform float u_ambient;
uniform float u_diffuse;
uniform int u_flip_back;
// Reforged HD (renderer.rules, "Reforged HD materials"): u_texture is the diffuse slot.
uniform sampler2D u_normal_map;
uniform sampler2D u_orm_map;
uniform sampler2D u_emissive_map;
uniform sampler2D u_team_map;
uniform sampler2D u_env_map;
uniform int u_env_found;
uniform float u_emissive_gain;
uniform vec3 u_eye;

out vec4 frag;

const float PI = 3.14159265358979;

vec3 to_light() {
    return u_light_point != 0 ? normalize(u_light_vector - v_world) : u_light_vector;
}

float light_factor(vec3 n) {
    if (u_flip_back != 0 && !gl_FrontFacing) n = -n;
    return min(u_ambient + u_diffuse * clamp(dot(n, to_light()), 0.0, 1.0), 1.0);
}

#if LIGHTS
// The model's own LITE lights (renderer.rules, "Model lights"); compiled in only when a frame asks
// for them (the LIGHTS variant), so frames without lights pay nothing.
uniform int u_light_count;
uniform int u_light_kind[LIGHTS];  // 0 omni, 1 directional, 2 ambient
uniform vec3 u_light_pos[LIGHTS];
uniform vec3 u_light_dir[LIGHTS];  // towards a directional light
uniform vec3 u_light_diffuse[LIGHTS];
uniform vec3 u_light_ambient[LIGHTS];
uniform vec2 u_light_att[LIGHTS];  // attenuation start, end

float light_attenuation(float d, vec2 se) {
    if (se.y <= se.x) return d <= se.y ? 1.0 : 0.0;
    return clamp((se.y - d) / (se.y - se.x), 0.0, 1.0);
}

vec3 model_lights(vec3 n) {
    n = length(n) > 0.0 ? normalize(n) : n;
    if (u_flip_back != 0 && !gl_FrontFacing) n = -n;
    vec3 sum = vec3(0.0);
    for (int i = 0; i < LIGHTS; ++i) {
        if (i >= u_light_count) break;
        vec3 d = u_light_pos[i] - v_world;
        float dist = length(d);
        bool directional = u_light_kind[i] == 1;
        float att = directional ? 1.0 : light_attenuation(dist, u_light_att[i]);
        vec3 l = directional ? u_light_dir[i] : (dist > 0.0 ? d / dist : vec3(0.0));
        vec3 diffuse = u_light_kind[i] == 2 ? vec3(0.0) : u_light_diffuse[i] * clamp(dot(n, l), 0.0, 1.0);
        sum += (diffuse + u_light_ambient[i]) * att;
    }
    return sum;
}
#endif

vec3 hd_normal() {
    vec3 n = normalize(v_normal);
    vec3 t = normalize(v_tangent.xyz - n * dot(n, v_tangent.xyz));
    vec3 b = cross(n, t) * v_tangent.w;
    vec2 xy = texture(u_normal_map, v_uv).rg * 2.0 - 1.0;
    vec3 ts = vec3(xy, sqrt(max(1.0 - dot(xy, xy), 0.0)));
    return normalize(t * ts.x + b * ts.y + n * ts.z);
}

vec3 schlick(float cos_theta, vec3 f0) {
    return f0 + (1.0 - f0) * pow(1.0 - clamp(cos_theta, 0.0, 1.0), 5.0);
}

vec3 hd_shade(vec4 c) {
    vec4 orm = texture(u_orm_map, v_uv);
    vec3 albedo = mix(c.rgb, c.rgb * texture(u_team_map, v_uv).rgb, orm.a);
    vec3 emissive = texture(u_emissive_map, v_uv).rgb * u_emissive_gain;
#if !SHADED
    return albedo + emissive;
#else
    vec3 n = hd_normal();
    vec3 l = to_light();
    vec3 v = normalize(u_eye - v_world);
    float r = clamp(orm.g, 0.04, 1.0);
    float metallic = orm.b;
    vec3 f0 = mix(vec3(0.04), albedo, metallic);
#if LIGHTS
    vec3 rgb = albedo * (vec3(light_factor(n)) + model_lights(n)) * orm.r;
#else
    vec3 rgb = albedo * light_factor(n) * orm.r;
#endif
    float nl = max(dot(n, l), 0.0), nv = max(dot(n, v), 1e-4);
    if (nl > 0.0) {
        vec3 h = normalize(l + v);
        float a2 = r * r * r * r;
        float nh = max(dot(n, h), 0.0);
        float d = a2 / (PI * pow(nh * nh * (a2 - 1.0) + 1.0, 2.0));
        float k = (r + 1.0) * (r + 1.0) / 8.0;
        float g = (nl / (nl * (1.0 - k) + k)) * (nv / (nv * (1.0 - k) + k));
        rgb += schlick(dot(h, v), f0) * d * g / (4.0 * nl * nv) * nl;
    }
    vec3 env = vec3(0.0);
    if (u_env_found != 0) {
        vec3 refl = reflect(-v, n);
        vec2 euv = vec2(atan(refl.y, refl.x) / (2.0 * PI) + 0.5, acos(clamp(refl.z, -1.0, 1.0)) / PI);
        env = texture(u_env_map, euv).rgb;
    } else {
        env = texture(u_env_map, vec2(0.5)).rgb;  // the neutral constant
    }
    rgb += env * schlick(nv, f0) * (1.0 - r);
    return rgb + emissive;
#endif
}

void main() {
    vec4 c = texture(u_texture, v_uv) * u_color;
#if ALPHA_TEST
    if (c.a < u_alpha_test) discard;
#endif
#if HD
    c.rgb = hd_shade(c);
#elif SHADED
#if LIGHTS
    c.rgb *= vec3(light_factor(v_normal)) + model_lights(v_normal);
#else
    c.rgb *= light_factor(v_normal);
#endif
#endif
    if (u_opaque != 0) c.a = 1.0;
    frag = c;
}
"""

UNIFORMS = (
    "u_palette", "u_palette_offset", "u_view", "u_projection", "u_uv_matrix", "u_sphere_env", "u_texture",
    "u_color", "u_alpha_test", "u_opaque", "u_light_vector", "u_light_point", "u_ambient", "u_diffuse",
    "u_flip_back", "u_normal_map", "u_orm_map", "u_emissive_map", "u_team_map", "u_env_map", "u_env_found",
    "u_emissive_gain", "u_eye",
)
# The light loop's uniforms (arrays: the location of element 0), in the LIGHTS variants only.
LIGHT_UNIFORMS = ("u_light_count", "u_light_kind", "u_light_pos", "u_light_dir", "u_light_diffuse",
                  "u_light_ambient", "u_light_att")
# Texture units: 0 the layer's (diffuse) texture, 1 the palette buffer, then the HD slots 1..5.
HD_SLOT_UNITS = {"normal": 2, "orm": 3, "emissive": 4, "team_color": 5, "environment": 6}
HD_SLOT_UNIFORMS = {"normal": "u_normal_map", "orm": "u_orm_map", "emissive": "u_emissive_map",
                    "team_color": "u_team_map", "environment": "u_env_map"}


def fragment_source(hd: bool, lights: int = 0, shaded: bool = True, alpha_test: bool = True) -> str:
    """The fragment shader of one variant: classic or Reforged HD layers; shaded by the lighting
    rule or unshaded (the layer's Unshaded flag); with or without the alpha test's discard (layers
    whose filter mode has none); with `lights` > 0, also the loop over up to that many model lights.

    Separate programs, not uniform branches: llvmpipe runs both sides of a branch for every fragment
    (masked SIMD), so an unshaded layer would pay for the lighting, a classic layer for the HD
    path's five texture reads and its specular term, and every frame for the light loop. A variant
    computes exactly what the branch it replaces computed (same expressions, same order)."""
    defines = (f"#define HD {int(bool(hd))}\n#define LIGHTS {int(lights)}\n#define SHADED {int(bool(shaded))}\n"
               f"#define ALPHA_TEST {int(bool(alpha_test))}")
    return FRAGMENT.replace("#version 330 core", "#version 330 core\n" + defines, 1)


class ModelProgram:
    """The model shader's variants (`fragment_source`), compiled on first use, with their uniform
    locations (needs a current context). `select_lights(on)` picks the family with or without the
    model-light loop; `variant(hd, shaded, alpha_test)` gives one program of that family."""

    def __init__(self):
        self._variants: dict[tuple, tuple[int, dict]] = {}  # (lights, hd, shaded, alpha_test) -> program, locations
        self.lights = False
        # (program, location) -> the value it holds (StateCache's `uniforms`); the draw loop's own keys
        # (program, "frame") and (program, "pass") stand for its frame uniforms and a pass's constant ones
        self.uniform_values: dict = {}

    def select_lights(self, on: bool) -> None:
        """Make `variant` give the programs with (on) or without the model-light loop."""
        self.lights = bool(on)

    def variant(self, hd: bool, shaded: bool, alpha_test: bool) -> tuple[int, dict]:
        """(program, uniform locations) of one variant of the selected family, built on first use
        (frames never build the variants they do not draw with)."""
        key = (self.lights, bool(hd), bool(shaded), bool(alpha_test))
        found = self._variants.get(key)
        if found is None:
            from OpenGL import GL

            lights, hd, shaded, alpha_test = key
            names = UNIFORMS + (LIGHT_UNIFORMS if lights else ())
            label = "model" + ("-hd" if hd else "") + ("" if shaded else "-unshaded") + \
                ("-alpha-test" if alpha_test else "") + ("-lights" if lights else "")
            program = build_program(VERTEX, fragment_source(hd, MAX_LIGHTS if lights else 0, shaded, alpha_test),
                                    label=label)
            found = (program, {name: GL.glGetUniformLocation(program, name) for name in names})
            self._variants[key] = found
        return found

    @staticmethod
    def set_lighting(loc: dict, rule, cache, program: int) -> None:
        """Load a `renderer.rules.LightingRule` into the uniforms at `loc` of the bound `program`,
        through `cache` (a renderer.gl.state.StateCache: values it holds already are not set again)."""
        gl = cache.gl
        vector = rule.vector if rule.point else rule.to_light()
        cache.uniform(program, loc["u_light_vector"], gl.glUniform3f, *(float(v) for v in vector))
        cache.uniform(program, loc["u_light_point"], gl.glUniform1i, 1 if rule.point else 0)
        cache.uniform(program, loc["u_ambient"], gl.glUniform1f, float(rule.ambient))
        cache.uniform(program, loc["u_diffuse"], gl.glUniform1f, float(rule.diffuse))
        cache.uniform(program, loc["u_flip_back"], gl.glUniform1i, 1 if rule.flip_back_faces else 0)

    @staticmethod
    def set_lights(loc: dict, lights) -> None:
        """Load a `renderer.lights.FrameLights` into a light variant's uniforms at `loc` (bound)."""
        from OpenGL import GL

        GL.glUniform1i(loc["u_light_count"], int(lights.count))
        GL.glUniform1iv(loc["u_light_kind"], MAX_LIGHTS, lights.kind.astype(np.int32))
        for name, data in (("u_light_pos", lights.position), ("u_light_dir", lights.to_light),
                           ("u_light_diffuse", lights.diffuse), ("u_light_ambient", lights.ambient)):
            GL.glUniform3fv(loc[name], MAX_LIGHTS, np.ascontiguousarray(data, np.float32))
        GL.glUniform2fv(loc["u_light_att"], MAX_LIGHTS, np.ascontiguousarray(lights.attenuation, np.float32))

    def delete(self) -> None:
        from OpenGL import GL

        for program, _ in self._variants.values():
            GL.glDeleteProgram(program)
        self._variants = {}
        self.uniform_values = {}
