"""GL programs and draws for particles (instanced quads) and ribbon strips (needs a current context).

Particles: one static 4-vertex corner strip, and one instance buffer per frame holding every
particle of the frame (layout `renderer.fx.pre2.INSTANCE_FLOATS`: position 3, axis 3, rgba 4, UV
rectangle 4, half-size 1, kind 1). A draw is one `glDrawArraysInstanced` over a contiguous range
of that buffer (one emitter with one blend state and texture), whatever its particle count.
Kinds: 0 camera-facing quad (camera right/up from the view matrix); 1 quad in the world XY plane
whose local X is `axis.xy`; 2 tail: from `position` along `axis` (the tail vector), widened
perpendicular to the axis and the view direction; 3 tail lying flat (widened along axis x Z).
UVs: u left to right, v top (image row 0) to bottom; on tails u runs from the tail end (0) to the
head (1).

Ribbons: one vertex buffer per frame with every strip (position 3, rgba 4, uv 2), one
`glDrawArrays(GL_TRIANGLE_STRIP)` per ribbon. The fragment colour is texture x vertex colour x
`u_color`, with the blend state's alpha test; opaque layer states write alpha 1.

Neither program lights anything: the caller passes a shade factor (1 for unshaded).
"""

from __future__ import annotations

import ctypes

import numpy as np

from .calls import check
from .shaders import build_program
from .state import StateCache

PARTICLE_VERTEX = """
#version 330 core
layout(location = 0) in vec2 a_corner;
layout(location = 1) in vec3 i_position;
layout(location = 2) in vec3 i_axis;
layout(location = 3) in vec4 i_color;
layout(location = 4) in vec4 i_uv;
layout(location = 5) in vec2 i_size_kind;

uniform mat4 u_view;
uniform mat4 u_projection;
uniform vec3 u_right;
uniform vec3 u_up;
uniform vec3 u_back;

out vec4 v_color;
out vec2 v_uv;

void main() {
    float size = i_size_kind.x;
    int kind = int(i_size_kind.y + 0.5);
    vec2 st = a_corner * 0.5 + 0.5;
    vec3 p;
    vec2 uv = vec2(st.x, 1.0 - st.y);
    if (kind == 0) {
        p = i_position + (a_corner.x * u_right + a_corner.y * u_up) * size;
    } else if (kind == 1) {
        vec3 ax = vec3(i_axis.xy, 0.0);
        vec3 ay = vec3(-i_axis.y, i_axis.x, 0.0);
        p = i_position + (a_corner.x * ax + a_corner.y * ay) * size;
    } else {
        vec3 n = kind == 3 ? vec3(0.0, 0.0, 1.0) : u_back;
        vec3 side = cross(i_axis, n);
        float len = length(side);
        side = len > 1e-9 ? side / len : u_up;
        p = i_position + i_axis * st.x + side * (a_corner.y * size);
        uv = vec2(1.0 - st.x, 1.0 - st.y);
    }
    v_uv = i_uv.xy + uv * i_uv.zw;
    v_color = i_color;
    gl_Position = u_projection * (u_view * vec4(p, 1.0));
}
"""

PARTICLE_FRAGMENT = """
#version 330 core
in vec4 v_color;
in vec2 v_uv;

uniform sampler2D u_texture;
uniform float u_alpha_test;
uniform float u_shade;

out vec4 frag;

void main() {
    vec4 c = texture(u_texture, v_uv) * v_color;
    if (c.a < u_alpha_test) discard;
    c.rgb *= u_shade;
    frag = c;
}
"""

RIBBON_VERTEX = """
#version 330 core
layout(location = 0) in vec3 a_position;
layout(location = 1) in vec4 a_color;
layout(location = 2) in vec2 a_uv;

uniform mat4 u_view;
uniform mat4 u_projection;
uniform mat3 u_uv_matrix;

out vec4 v_color;
out vec2 v_uv;

void main() {
    v_uv = (u_uv_matrix * vec3(a_uv, 1.0)).xy;
    v_color = a_color;
    gl_Position = u_projection * (u_view * vec4(a_position, 1.0));
}
"""

RIBBON_FRAGMENT = """
#version 330 core
in vec4 v_color;
in vec2 v_uv;

uniform sampler2D u_texture;
uniform vec4 u_color;
uniform float u_alpha_test;
uniform int u_opaque;
uniform float u_shade;

out vec4 frag;

void main() {
    vec4 c = texture(u_texture, v_uv) * v_color * u_color;
    if (c.a < u_alpha_test) discard;
    c.rgb *= u_shade;
    if (u_opaque != 0) c.a = 1.0;
    frag = c;
}
"""

INSTANCE_FLOATS = 16
RIBBON_FLOATS = 9
class EffectPrograms:
    """The particle and ribbon programs with their buffers (one set per GL context)."""

    PARTICLE_UNIFORMS = ("u_view", "u_projection", "u_right", "u_up", "u_back", "u_texture", "u_alpha_test",
                         "u_shade")
    RIBBON_UNIFORMS = ("u_view", "u_projection", "u_uv_matrix", "u_texture", "u_color", "u_alpha_test", "u_opaque",
                       "u_shade")

    def __init__(self):
        from OpenGL import GL

        self.particle = build_program(PARTICLE_VERTEX, PARTICLE_FRAGMENT, label="particles")
        self.ribbon = build_program(RIBBON_VERTEX, RIBBON_FRAGMENT, label="ribbons")
        self.ploc = {n: GL.glGetUniformLocation(self.particle, n) for n in self.PARTICLE_UNIFORMS}
        self.rloc = {n: GL.glGetUniformLocation(self.ribbon, n) for n in self.RIBBON_UNIFORMS}
        self.corner_vbo, self.instance_vbo, self.ribbon_vbo = (int(x) for x in GL.glGenBuffers(3))
        self.particle_vao, self.ribbon_vao = (int(x) for x in GL.glGenVertexArrays(2))
        corners = np.array([[-1, -1], [1, -1], [-1, 1], [1, 1]], np.float32)
        GL.glBindVertexArray(self.particle_vao)
        GL.glBindBuffer(GL.GL_ARRAY_BUFFER, self.corner_vbo)
        GL.glBufferData(GL.GL_ARRAY_BUFFER, corners.nbytes, corners, GL.GL_STATIC_DRAW)
        GL.glEnableVertexAttribArray(0)
        GL.glVertexAttribPointer(0, 2, GL.GL_FLOAT, GL.GL_FALSE, 8, ctypes.c_void_p(0))
        GL.glBindBuffer(GL.GL_ARRAY_BUFFER, self.instance_vbo)
        for loc in range(1, 6):
            GL.glEnableVertexAttribArray(loc)
            GL.glVertexAttribDivisor(loc, 1)
        GL.glBindVertexArray(self.ribbon_vao)
        GL.glBindBuffer(GL.GL_ARRAY_BUFFER, self.ribbon_vbo)
        for loc, size, off in ((0, 3, 0), (1, 4, 3), (2, 2, 7)):
            GL.glEnableVertexAttribArray(loc)
            GL.glVertexAttribPointer(loc, size, GL.GL_FLOAT, GL.GL_FALSE, RIBBON_FLOATS * 4, ctypes.c_void_p(off * 4))
        GL.glBindVertexArray(0)
        GL.glBindBuffer(GL.GL_ARRAY_BUFFER, 0)
        self._instance_capacity = 0
        self._ribbon_capacity = 0
        self.draw_calls = 0
        self._cache: StateCache | None = None  # between a begin_* and `end`

    # -- particles ------------------------------------------------------------------------------

    def upload_instances(self, data: np.ndarray) -> None:
        """Every particle instance of the frame, (n, INSTANCE_FLOATS) float32."""
        self._upload(self.instance_vbo, data, "_instance_capacity")

    def upload_ribbons(self, data: np.ndarray) -> None:
        """Every ribbon vertex of the frame, (n, RIBBON_FLOATS) float32."""
        self._upload(self.ribbon_vbo, data, "_ribbon_capacity")

    def _upload(self, vbo: int, data: np.ndarray, capacity_attr: str) -> None:
        from OpenGL import GL

        data = np.ascontiguousarray(data, np.float32)
        GL.glBindBuffer(GL.GL_ARRAY_BUFFER, vbo)
        if data.nbytes > getattr(self, capacity_attr):
            GL.glBufferData(GL.GL_ARRAY_BUFFER, max(data.nbytes, 64), None, GL.GL_STREAM_DRAW)
            setattr(self, capacity_attr, max(data.nbytes, 64))
        if data.nbytes:
            GL.glBufferSubData(GL.GL_ARRAY_BUFFER, 0, data.nbytes, data)
        GL.glBindBuffer(GL.GL_ARRAY_BUFFER, 0)

    def _begin(self) -> StateCache:
        """A fresh state cache for the draws after a begin_* (never one left from a run of draws
        that failed before its `end`: its record of the state would be stale)."""
        self._cache = StateCache()
        return self._cache

    def _state(self) -> StateCache:
        if self._cache is None:  # a draw without a begin_*: know nothing
            self._cache = StateCache()
        return self._cache

    def begin_particles(self, view: np.ndarray, projection: np.ndarray) -> None:
        from OpenGL import GL

        st = self._begin()
        st.use_program(self.particle)
        loc = self.ploc
        GL.glUniformMatrix4fv(loc["u_view"], 1, GL.GL_TRUE, np.asarray(view, np.float32))
        GL.glUniformMatrix4fv(loc["u_projection"], 1, GL.GL_TRUE, np.asarray(projection, np.float32))
        rot = np.asarray(view, np.float64)[:3, :3]
        rot = rot / np.linalg.norm(rot, axis=1, keepdims=True)
        GL.glUniform3f(loc["u_right"], *rot[0])
        GL.glUniform3f(loc["u_up"], *rot[1])
        GL.glUniform3f(loc["u_back"], *rot[2])
        GL.glUniform1i(loc["u_texture"], 0)
        st.active_texture(0)
        GL.glBindVertexArray(self.particle_vao)

    def draw_particles(self, first: int, count: int, texture: int, state, shade: float) -> None:
        """Instances [first, first + count) of the uploaded buffer in one instanced draw."""
        from OpenGL import GL

        if count <= 0:
            return
        st = self._state()
        gl = st.gl
        st.apply(state)
        st.bind_texture(0, GL.GL_TEXTURE_2D, texture)
        st.uniform(self.particle, self.ploc["u_alpha_test"], gl.glUniform1f, state.alpha_test)
        st.uniform(self.particle, self.ploc["u_shade"], gl.glUniform1f, shade)
        gl.glBindBuffer(GL.GL_ARRAY_BUFFER, self.instance_vbo)
        stride = INSTANCE_FLOATS * 4
        base = first * stride
        for loc, size, off in ((1, 3, 0), (2, 3, 3), (3, 4, 6), (4, 4, 10), (5, 2, 14)):
            gl.glVertexAttribPointer(loc, size, GL.GL_FLOAT, GL.GL_FALSE, stride, ctypes.c_void_p(base + off * 4))
        gl.glBindBuffer(GL.GL_ARRAY_BUFFER, 0)
        gl.glDrawArraysInstanced(GL.GL_TRIANGLE_STRIP, 0, 4, count)
        self.draw_calls += 1

    # -- ribbons --------------------------------------------------------------------------------

    def begin_ribbons(self, view: np.ndarray, projection: np.ndarray) -> None:
        from OpenGL import GL

        st = self._begin()
        st.use_program(self.ribbon)
        loc = self.rloc
        GL.glUniformMatrix4fv(loc["u_view"], 1, GL.GL_TRUE, np.asarray(view, np.float32))
        GL.glUniformMatrix4fv(loc["u_projection"], 1, GL.GL_TRUE, np.asarray(projection, np.float32))
        GL.glUniform1i(loc["u_texture"], 0)
        st.active_texture(0)
        GL.glBindVertexArray(self.ribbon_vao)

    def draw_ribbon(self, first: int, count: int, texture: int, state, color, uv_matrix, shade: float,
                    depth_test: bool = True, depth_write: bool | None = None) -> None:
        from OpenGL import GL

        if count < 4:
            return
        st = self._state()
        gl = st.gl
        st.apply(state, depth_test, depth_write)
        st.bind_texture(0, GL.GL_TEXTURE_2D, texture)
        loc, prog = self.rloc, self.ribbon
        st.uniform(prog, loc["u_color"], gl.glUniform4f, *(float(c) for c in color))
        st.uniform(prog, loc["u_alpha_test"], gl.glUniform1f, state.alpha_test)
        st.uniform(prog, loc["u_opaque"], gl.glUniform1i, 1 if state.opaque else 0)
        st.uniform(prog, loc["u_shade"], gl.glUniform1f, shade)
        st.uniform_matrix(prog, loc["u_uv_matrix"], gl.glUniformMatrix3fv, uv_matrix)
        gl.glDrawArrays(GL.GL_TRIANGLE_STRIP, first, count)
        self.draw_calls += 1

    def end(self) -> None:
        """After a run of draws: raise a GL error they left (`renderer.gl.calls.check`), then leave
        blending off, depth test and writes on, texture unit 0 active."""
        from OpenGL import GL

        self._cache = None
        check("drawing particles and ribbons")
        GL.glActiveTexture(GL.GL_TEXTURE0)
        GL.glBindVertexArray(0)
        GL.glDepthMask(GL.GL_TRUE)
        GL.glDisable(GL.GL_BLEND)
        GL.glEnable(GL.GL_DEPTH_TEST)

    def delete(self) -> None:
        from OpenGL import GL

        GL.glDeleteProgram(self.particle)
        GL.glDeleteProgram(self.ribbon)
        GL.glDeleteBuffers(3, [self.corner_vbo, self.instance_vbo, self.ribbon_vbo])
        GL.glDeleteVertexArrays(2, [self.particle_vao, self.ribbon_vao])
        self.particle = self.ribbon = 0

