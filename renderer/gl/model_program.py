"""The GLSL program that draws geoset layers: palette skinning, one UV set, lit or unshaded.

Skinning: every vertex carries 4 palette indices and 4 weights; the palette is a texture buffer
of affine matrices (3 RGBA32F texels each: the matrix's first three rows). Position and normal
are transformed by the weighted sum of the matrices; the normal is renormalised. A vertex whose
weights sum to 0 is left in its bind position.

Lighting: the frame's named `renderer.rules.LightingRule` (point or directional light, ambient,
diffuse, back-face flip), set by `set_lighting`; Unshaded layers skip it. Fog is off.
"""

from __future__ import annotations

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
uniform float u_alpha_test;
uniform int u_opaque;
uniform int u_unshaded;
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
    if (u_unshaded != 0) return albedo + emissive;
    vec3 n = hd_normal();
    vec3 l = to_light();
    vec3 v = normalize(u_eye - v_world);
    float r = clamp(orm.g, 0.04, 1.0);
    float metallic = orm.b;
    vec3 f0 = mix(vec3(0.04), albedo, metallic);
    vec3 rgb = albedo * light_factor(n) * orm.r;
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
}

void main() {
    vec4 c = texture(u_texture, v_uv) * u_color;
    if (c.a < u_alpha_test) discard;
#if HD
    c.rgb = hd_shade(c);
#else
    if (u_unshaded == 0) c.rgb *= light_factor(v_normal);
#endif
    if (u_opaque != 0) c.a = 1.0;
    frag = c;
}
"""

UNIFORMS = (
    "u_palette", "u_palette_offset", "u_view", "u_projection", "u_uv_matrix", "u_sphere_env", "u_texture",
    "u_color", "u_alpha_test", "u_opaque", "u_unshaded", "u_light_vector", "u_light_point", "u_ambient", "u_diffuse",
    "u_flip_back", "u_normal_map", "u_orm_map", "u_emissive_map", "u_team_map", "u_env_map", "u_env_found",
    "u_emissive_gain", "u_eye",
)
# Texture units: 0 the layer's (diffuse) texture, 1 the palette buffer, then the HD slots 1..5.
HD_SLOT_UNITS = {"normal": 2, "orm": 3, "emissive": 4, "team_color": 5, "environment": 6}
HD_SLOT_UNIFORMS = {"normal": "u_normal_map", "orm": "u_orm_map", "emissive": "u_emissive_map",
                    "team_color": "u_team_map", "environment": "u_env_map"}


def fragment_source(hd: bool) -> str:
    """The fragment shader of one variant: classic layers, or Reforged HD layers. Two programs, not
    one with a uniform branch: llvmpipe runs both sides of a branch for every fragment (masked SIMD),
    so classic layers would pay for the HD path's five texture reads and its specular term."""
    return FRAGMENT.replace("#version 330 core", f"#version 330 core\n#define HD {1 if hd else 0}", 1)


class ModelProgram:
    """The two compiled variants (classic, HD) and their uniform locations (needs a current
    context). `use(hd)` binds one; `program` and `loc` are the bound variant's."""

    def __init__(self):
        from OpenGL import GL

        from .shaders import build_program

        self.programs = {hd: build_program(VERTEX, fragment_source(hd), label="model-hd" if hd else "model")
                         for hd in (False, True)}
        self.locs = {hd: {name: GL.glGetUniformLocation(p, name) for name in UNIFORMS}
                     for hd, p in self.programs.items()}
        self.hd = False
        self.program, self.loc = self.programs[False], self.locs[False]

    def use(self, hd: bool) -> None:
        from OpenGL import GL

        self.hd = bool(hd)
        self.program, self.loc = self.programs[self.hd], self.locs[self.hd]
        GL.glUseProgram(self.program)

    def set_lighting(self, rule) -> None:
        """Load a `renderer.rules.LightingRule` into the (bound) program's uniforms."""
        from OpenGL import GL

        vector = rule.vector if rule.point else rule.to_light()
        GL.glUniform3f(self.loc["u_light_vector"], *vector)
        GL.glUniform1i(self.loc["u_light_point"], 1 if rule.point else 0)
        GL.glUniform1f(self.loc["u_ambient"], rule.ambient)
        GL.glUniform1f(self.loc["u_diffuse"], rule.diffuse)
        GL.glUniform1i(self.loc["u_flip_back"], 1 if rule.flip_back_faces else 0)

    def delete(self) -> None:
        from OpenGL import GL

        for p in self.programs.values():
            GL.glDeleteProgram(p)
        self.programs = {}
        self.program = 0
