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

uniform samplerBuffer u_palette;
uniform int u_palette_offset;
uniform mat4 u_view;
uniform mat4 u_projection;
uniform mat3 u_uv_matrix;
uniform int u_sphere_env;

out vec3 v_normal;
out vec2 v_uv;
out vec3 v_world;  // skinned world position (read back by transform feedback in tests)

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

out vec4 frag;

float light_factor(vec3 n) {
    vec3 l = u_light_point != 0 ? normalize(u_light_vector - v_world) : u_light_vector;
    if (u_flip_back != 0 && !gl_FrontFacing) n = -n;
    return min(u_ambient + u_diffuse * clamp(dot(n, l), 0.0, 1.0), 1.0);
}

void main() {
    vec4 c = texture(u_texture, v_uv) * u_color;
    if (c.a < u_alpha_test) discard;
    if (u_unshaded == 0) c.rgb *= light_factor(v_normal);
    if (u_opaque != 0) c.a = 1.0;
    frag = c;
}
"""

UNIFORMS = (
    "u_palette", "u_palette_offset", "u_view", "u_projection", "u_uv_matrix", "u_sphere_env", "u_texture",
    "u_color", "u_alpha_test", "u_opaque", "u_unshaded", "u_light_vector", "u_light_point", "u_ambient", "u_diffuse",
    "u_flip_back",
)


class ModelProgram:
    """The compiled program and its uniform locations (needs a current context)."""

    def __init__(self):
        from OpenGL import GL

        from .shaders import build_program

        self.program = build_program(VERTEX, FRAGMENT, label="model")
        self.loc = {name: GL.glGetUniformLocation(self.program, name) for name in UNIFORMS}

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

        GL.glDeleteProgram(self.program)
        self.program = 0
