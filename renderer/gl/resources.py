"""GPU resources of one model: geoset vertex/index buffers and textures (needs a current context)."""

from __future__ import annotations

import ctypes

import numpy as np

# Interleaved per-vertex layout: position 3, normal 3, palette indices 4, weights 4 (float32).
STRIDE_FLOATS = 14


class GeosetBuffers:
    """`tangents` (n, 4), for HD materials, go to attribute 5 (absent: (0, 0, 0, 1))."""

    __slots__ = ("vao", "vbo", "uvbo", "ebo", "tbo", "count", "nverts", "nsets", "uv_set")

    def __init__(self, positions, normals, bones, weights, uv_sets, triangles, tangents=None):
        from OpenGL import GL

        n = len(positions)
        inter = np.empty((n, STRIDE_FLOATS), np.float32)
        inter[:, 0:3] = positions
        inter[:, 3:6] = normals
        inter[:, 6:10] = bones
        inter[:, 10:14] = weights
        uvs = np.concatenate([np.asarray(u, np.float32).reshape(n, 2) for u in uv_sets]) if uv_sets else (
            np.zeros((n, 2), np.float32))
        idx = np.ascontiguousarray(triangles, np.uint32).reshape(-1)
        self.nverts, self.nsets, self.count = n, max(len(uv_sets), 1), len(idx)
        self.uv_set = 0  # the UV set attribute 4 points at (set 0 below)
        self.vao = int(GL.glGenVertexArrays(1))
        self.vbo, self.uvbo, self.ebo = (int(x) for x in GL.glGenBuffers(3))
        GL.glBindVertexArray(self.vao)
        GL.glBindBuffer(GL.GL_ARRAY_BUFFER, self.vbo)
        GL.glBufferData(GL.GL_ARRAY_BUFFER, inter.nbytes, inter, GL.GL_STATIC_DRAW)
        stride = STRIDE_FLOATS * 4
        for loc, size, off in ((0, 3, 0), (1, 3, 3), (2, 4, 6), (3, 4, 10)):
            GL.glEnableVertexAttribArray(loc)
            GL.glVertexAttribPointer(loc, size, GL.GL_FLOAT, GL.GL_FALSE, stride, ctypes.c_void_p(off * 4))
        GL.glBindBuffer(GL.GL_ARRAY_BUFFER, self.uvbo)
        GL.glBufferData(GL.GL_ARRAY_BUFFER, uvs.nbytes, np.ascontiguousarray(uvs), GL.GL_STATIC_DRAW)
        GL.glEnableVertexAttribArray(4)
        GL.glVertexAttribPointer(4, 2, GL.GL_FLOAT, GL.GL_FALSE, 8, ctypes.c_void_p(0))
        self.tbo = 0
        if tangents is not None:
            tan = np.ascontiguousarray(np.asarray(tangents, np.float32).reshape(n, 4))
            self.tbo = int(GL.glGenBuffers(1))
            GL.glBindBuffer(GL.GL_ARRAY_BUFFER, self.tbo)
            GL.glBufferData(GL.GL_ARRAY_BUFFER, tan.nbytes, tan, GL.GL_STATIC_DRAW)
            GL.glEnableVertexAttribArray(5)
            GL.glVertexAttribPointer(5, 4, GL.GL_FLOAT, GL.GL_FALSE, 16, ctypes.c_void_p(0))
        GL.glBindBuffer(GL.GL_ELEMENT_ARRAY_BUFFER, self.ebo)
        GL.glBufferData(GL.GL_ELEMENT_ARRAY_BUFFER, max(idx.nbytes, 4), idx if len(idx) else np.zeros(1, np.uint32),
                        GL.GL_STATIC_DRAW)
        GL.glBindVertexArray(0)

    def use_uv_set(self, k: int) -> None:
        """Point the UV attribute at set k (the layer's coordId); a missing set falls back to set 0."""
        k = k if 0 <= k < self.nsets else 0
        if k == self.uv_set:  # the VAO keeps the pointer: nothing to do
            return
        from OpenGL import GL

        from .calls import fast  # lazily, like GL above: no GL in a parent process

        gl = fast()  # called in draw loops, which check for errors after their draws
        gl.glBindBuffer(GL.GL_ARRAY_BUFFER, self.uvbo)
        gl.glVertexAttribPointer(4, 2, GL.GL_FLOAT, GL.GL_FALSE, 8, ctypes.c_void_p(k * self.nverts * 8))
        gl.glBindBuffer(GL.GL_ARRAY_BUFFER, 0)
        self.uv_set = k

    def draw(self, gl=None) -> None:
        """All triangles; `gl`: where glDrawElements comes from (`renderer.gl.calls.fast()` in
        the draw loop), OpenGL.GL by default."""
        from OpenGL import GL

        (gl or GL).glDrawElements(GL.GL_TRIANGLES, self.count, GL.GL_UNSIGNED_INT, ctypes.c_void_p(0))

    def delete(self) -> None:
        from OpenGL import GL

        GL.glDeleteVertexArrays(1, [self.vao])
        GL.glDeleteBuffers(3, [self.vbo, self.uvbo, self.ebo])
        if self.tbo:
            GL.glDeleteBuffers(1, [self.tbo])


def upload_texture(rgba: np.ndarray, wrap_s: bool, wrap_t: bool, smooth: bool = True, mipmaps: str = "generate",
                   levels=()) -> int:
    """An RGBA8 texture; REPEAT on an axis whose wrap flag is set, else CLAMP_TO_EDGE.

    `smooth`: linear filtering, with mipmaps as `mipmaps` says (renderer.formats.textures.mips):
    "generate" builds them on the GPU, "stored" uploads `levels` (levels 1.., the max level is the
    last one), "none" has none (linear minification). Not smooth: nearest texels, no mipmaps
    (placeholders stay crisp).
    """
    from OpenGL import GL

    rgba = np.ascontiguousarray(rgba, np.uint8)
    h, w = rgba.shape[:2]
    tex = int(GL.glGenTextures(1))
    GL.glBindTexture(GL.GL_TEXTURE_2D, tex)
    GL.glPixelStorei(GL.GL_UNPACK_ALIGNMENT, 1)
    GL.glTexImage2D(GL.GL_TEXTURE_2D, 0, GL.GL_RGBA8, w, h, 0, GL.GL_RGBA, GL.GL_UNSIGNED_BYTE, rgba)
    mipmapped = smooth and (mipmaps == "generate" or (mipmaps == "stored" and len(levels) > 0))
    if mipmapped and mipmaps == "stored":
        for k, level in enumerate(levels, start=1):
            level = np.ascontiguousarray(level, np.uint8)
            lh, lw = level.shape[:2]
            GL.glTexImage2D(GL.GL_TEXTURE_2D, k, GL.GL_RGBA8, lw, lh, 0, GL.GL_RGBA, GL.GL_UNSIGNED_BYTE, level)
        GL.glTexParameteri(GL.GL_TEXTURE_2D, GL.GL_TEXTURE_MAX_LEVEL, len(levels))
    elif mipmapped:
        GL.glGenerateMipmap(GL.GL_TEXTURE_2D)
    else:
        GL.glTexParameteri(GL.GL_TEXTURE_2D, GL.GL_TEXTURE_MAX_LEVEL, 0)
    minify = (GL.GL_LINEAR_MIPMAP_LINEAR if mipmapped else GL.GL_LINEAR) if smooth else GL.GL_NEAREST
    GL.glTexParameteri(GL.GL_TEXTURE_2D, GL.GL_TEXTURE_MIN_FILTER, minify)
    GL.glTexParameteri(GL.GL_TEXTURE_2D, GL.GL_TEXTURE_MAG_FILTER, GL.GL_LINEAR if smooth else GL.GL_NEAREST)
    GL.glTexParameteri(GL.GL_TEXTURE_2D, GL.GL_TEXTURE_WRAP_S, GL.GL_REPEAT if wrap_s else GL.GL_CLAMP_TO_EDGE)
    GL.glTexParameteri(GL.GL_TEXTURE_2D, GL.GL_TEXTURE_WRAP_T, GL.GL_REPEAT if wrap_t else GL.GL_CLAMP_TO_EDGE)
    GL.glBindTexture(GL.GL_TEXTURE_2D, 0)
    return tex


def upload_loaded(t) -> int:
    """Upload a `renderer.texture_set.LoadedTexture` (placeholders unfiltered)."""
    return upload_texture(t.rgba, t.wrap_s, t.wrap_t, t.source != "missing", t.mipmaps, t.levels)


class PaletteBuffer:
    """A texture buffer of affine matrices (3 RGBA32F texels per matrix), refilled every frame."""

    def __init__(self):
        from OpenGL import GL

        self.buffer = int(GL.glGenBuffers(1))
        self.texture = int(GL.glGenTextures(1))
        self.capacity = 0
        self._parts: tuple = ()  # the arrays of the last upload_parts (kept: their ids stay theirs)

    def upload_parts(self, parts: list) -> None:
        """`upload` of the (m, 4, 4) arrays `parts` one after another (none: one zero matrix), unless
        the buffer holds exactly these array objects from the last upload. The caller never changes
        an array after handing it here (a pose's palettes are read-only inputs), so the same
        objects are the same values and a still frame does not copy its palettes again."""
        parts = tuple(parts)
        held = self._parts
        if len(held) == len(parts) and all(a is b for a, b in zip(held, parts, strict=True)) and parts:
            return
        self.upload(np.concatenate(parts) if parts else np.zeros((1, 4, 4), np.float32))
        self._parts = parts

    def upload(self, matrices: np.ndarray) -> None:
        """matrices: (M, 4, 4); only the first three rows are stored."""
        from OpenGL import GL

        self._parts = ()  # holds what it is given now, not what upload_parts last skipped for

        from .calls import fast  # lazily, like GL above: no GL in a parent process

        gl = fast()  # a frame's upload: unchecked calls (the draw loop checks after its draws)
        rows = np.ascontiguousarray(np.asarray(matrices, np.float32)[:, :3, :]).reshape(-1)
        if len(rows) == 0:
            rows = np.zeros(12, np.float32)
        data = ctypes.c_void_p(rows.ctypes.data)
        gl.glBindBuffer(GL.GL_TEXTURE_BUFFER, self.buffer)
        if rows.nbytes > self.capacity:
            gl.glBufferData(GL.GL_TEXTURE_BUFFER, rows.nbytes, data, GL.GL_DYNAMIC_DRAW)
            self.capacity = rows.nbytes
            gl.glBindTexture(GL.GL_TEXTURE_BUFFER, self.texture)  # the texture follows the buffer from here on
            gl.glTexBuffer(GL.GL_TEXTURE_BUFFER, GL.GL_RGBA32F, self.buffer)
        else:
            gl.glBufferSubData(GL.GL_TEXTURE_BUFFER, 0, rows.nbytes, data)
        gl.glBindBuffer(GL.GL_TEXTURE_BUFFER, 0)

    def delete(self) -> None:
        from OpenGL import GL

        GL.glDeleteTextures(1, [self.texture])
        GL.glDeleteBuffers(1, [self.buffer])
