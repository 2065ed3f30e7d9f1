"""Read skinned vertices back from the GPU with transform feedback.

The program is the model program's own vertex shader, linked with `v_world` and `v_normal` as
feedback varyings, so what comes back is exactly what the renderer draws with. Used to prove the
GPU skinning path against the CPU reference (`renderer.anim.skin_vertices`).
"""

from __future__ import annotations

import ctypes

import numpy as np

from .model_program import VERTEX
from .shaders import ShaderError, compile_shader

FEEDBACK_FRAGMENT = """
#version 330 core
out vec4 frag;
void main() { frag = vec4(1.0); }
"""


class SkinFeedback:
    """Runs the skinning vertex shader over a geoset's vertices and returns world positions/normals."""

    def __init__(self):
        from OpenGL import GL

        vs = compile_shader(VERTEX, "vertex", label="skin-feedback")
        fs = compile_shader(FEEDBACK_FRAGMENT, "fragment", label="skin-feedback")
        prog = int(GL.glCreateProgram())
        GL.glAttachShader(prog, vs)
        GL.glAttachShader(prog, fs)
        names = [b"v_world", b"v_normal"]
        arr = (ctypes.c_char_p * len(names))(*names)
        varyings = ctypes.cast(arr, ctypes.POINTER(ctypes.POINTER(ctypes.c_char)))
        GL.glTransformFeedbackVaryings(prog, len(names), varyings, GL.GL_INTERLEAVED_ATTRIBS)
        GL.glLinkProgram(prog)
        GL.glDeleteShader(vs)
        GL.glDeleteShader(fs)
        if not GL.glGetProgramiv(prog, GL.GL_LINK_STATUS):
            log = GL.glGetProgramInfoLog(prog)
            GL.glDeleteProgram(prog)
            raise ShaderError("link", log.decode() if isinstance(log, bytes) else str(log), "skin-feedback")
        self.program = prog
        self.loc = {n: GL.glGetUniformLocation(prog, n) for n in ("u_palette", "u_palette_offset", "u_view",
                                                                 "u_projection", "u_uv_matrix", "u_sphere_env")}

    def run(self, buffers, palette_texture: int, palette_offset: int) -> tuple[np.ndarray, np.ndarray]:
        """buffers: a GeosetBuffers; palette_texture: the texture-buffer holding the frame's palette."""
        from OpenGL import GL

        n = buffers.nverts
        out = int(GL.glGenBuffers(1))
        GL.glBindBuffer(GL.GL_TRANSFORM_FEEDBACK_BUFFER, out)
        GL.glBufferData(GL.GL_TRANSFORM_FEEDBACK_BUFFER, n * 6 * 4, None, GL.GL_STATIC_READ)
        GL.glUseProgram(self.program)
        GL.glUniform1i(self.loc["u_palette"], 1)
        GL.glUniform1i(self.loc["u_palette_offset"], palette_offset)
        eye = np.eye(4, dtype=np.float32)
        GL.glUniformMatrix4fv(self.loc["u_view"], 1, GL.GL_TRUE, eye)
        GL.glUniformMatrix4fv(self.loc["u_projection"], 1, GL.GL_TRUE, eye)
        GL.glUniformMatrix3fv(self.loc["u_uv_matrix"], 1, GL.GL_TRUE, np.eye(3, dtype=np.float32))
        GL.glUniform1i(self.loc["u_sphere_env"], 0)
        GL.glActiveTexture(GL.GL_TEXTURE1)
        GL.glBindTexture(GL.GL_TEXTURE_BUFFER, palette_texture)
        GL.glActiveTexture(GL.GL_TEXTURE0)
        GL.glBindVertexArray(buffers.vao)
        GL.glEnable(GL.GL_RASTERIZER_DISCARD)
        GL.glBindBufferBase(GL.GL_TRANSFORM_FEEDBACK_BUFFER, 0, out)
        GL.glBeginTransformFeedback(GL.GL_POINTS)
        GL.glDrawArrays(GL.GL_POINTS, 0, n)
        GL.glEndTransformFeedback()
        GL.glDisable(GL.GL_RASTERIZER_DISCARD)
        GL.glBindVertexArray(0)
        data = np.empty(n * 6, np.float32)
        GL.glGetBufferSubData(GL.GL_TRANSFORM_FEEDBACK_BUFFER, 0, data.nbytes, data.ctypes.data_as(ctypes.c_void_p))
        GL.glBindBufferBase(GL.GL_TRANSFORM_FEEDBACK_BUFFER, 0, 0)
        GL.glDeleteBuffers(1, [out])
        data = data.reshape(n, 6)
        return data[:, :3].copy(), data[:, 3:].copy()

    def delete(self) -> None:
        from OpenGL import GL

        GL.glDeleteProgram(self.program)
