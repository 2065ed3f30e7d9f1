"""The GLSL program that draws geoset layers: palette skinning, one UV set, lit or unshaded.

Skinning: every vertex carries 4 palette indices and 4 weights; the palette is a texture buffer
of affine matrices (3 RGBA32F texels each: the matrix's first three rows). Position and normal
are transformed by the weighted sum of the matrices; the normal is renormalised. A vertex whose
weights sum to 0 is left in its bind position.

Lighting (documented default light): one directional light from `LIGHT_DIRECTION` (towards the
light, world space) with colour `LIGHT_COLOR`, plus `AMBIENT`; Unshaded layers skip it. Fog is off.
"""

from __future__ import annotations

LIGHT_DIRECTION = (0.3, -0.4, 0.866)
LIGHT_COLOR = (0.75, 0.75, 0.75)
AMBIENT = (0.4, 0.4, 0.4)

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

uniform sampler2D u_texture;
uniform vec4 u_color;
uniform float u_alpha_test;
uniform int u_opaque;
uniform int u_unshaded;
uniform vec3 u_light_direction;
uniform vec3 u_light_color;
uniform vec3 u_ambient;

out vec4 frag;

void main() {
    vec4 c = texture(u_texture, v_uv) * u_color;
    if (c.a < u_alpha_test) discard;
    if (u_unshaded == 0) {
        vec3 n = gl_FrontFacing ? v_normal : -v_normal;
        float d = max(dot(n, u_light_direction), 0.0);
        c.rgb *= min(u_ambient + u_light_color * d, vec3(1.0));
    }
    if (u_opaque != 0) c.a = 1.0;
    frag = c;
}
"""

UNIFORMS = (
    "u_palette", "u_palette_offset", "u_view", "u_projection", "u_uv_matrix", "u_sphere_env", "u_texture",
    "u_color", "u_alpha_test", "u_opaque", "u_unshaded", "u_light_direction", "u_light_color", "u_ambient",
)


class ModelProgram:
    """The compiled program and its uniform locations (needs a current context)."""

    def __init__(self):
        from OpenGL import GL

        from .shaders import build_program

        self.program = build_program(VERTEX, FRAGMENT, label="model")
        self.loc = {name: GL.glGetUniformLocation(self.program, name) for name in UNIFORMS}

    def delete(self) -> None:
        from OpenGL import GL

        GL.glDeleteProgram(self.program)
        self.program = 0
