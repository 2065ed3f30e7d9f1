"""GL blend, depth and culling state from a `renderer.blending.BlendState`, and the state cache every
draw loop sets it through."""

from __future__ import annotations

import ctypes
import itertools

from .calls import fast

_CACHES = itertools.count()  # each StateCache's token: a `key` of uniform_matrix holds for its cache only

_FACTORS: dict[str, int] = {}


def blend_factor(name: str) -> int:
    """GL enum of a blend factor named as in renderer.blending ("SRC_ALPHA", ...)."""
    if not _FACTORS:
        from OpenGL import GL

        for n in ("ZERO", "ONE", "SRC_ALPHA", "ONE_MINUS_SRC_ALPHA", "SRC_COLOR", "DST_COLOR"):
            _FACTORS[n] = getattr(GL, f"GL_{n}")
    return _FACTORS[name]


_BLEND_FACTORS: dict[tuple, tuple] = {}


def blend_factors(blend: tuple) -> tuple:
    """The GL enums of a BlendState's four factor names (glBlendFuncSeparate's arguments), kept."""
    found = _BLEND_FACTORS.get(blend)
    if found is None:
        found = _BLEND_FACTORS[blend] = tuple(blend_factor(f) for f in blend)
    return found


class StateCache:
    """What a draw loop last set (capabilities, blend factors, depth mask, program, textures,
    uniforms), so that a layer sets only what differs from the layer before: the GL state at each
    draw is exactly what setting all of it would leave, with fewer calls.

    Valid while nothing else changes that state: a loop makes one, starting from knowing nothing,
    and drops it when it ends. Uses the unchecked calls of `renderer.gl.calls` (the loop checks
    for errors once at its end).

    Uniform values live in their program object, which only its owner's loops set: `uniforms`, a dict
    the owner keeps for its programs (ModelProgram.uniform_values), carries what they hold from frame
    to frame, so a frame sets only the uniforms whose values changed since the frame before."""

    def __init__(self, uniforms: dict | None = None):
        from OpenGL import GL  # lazily, like every GL import here: no GL in a parent process

        self.gl = fast()
        self._enums = (GL.GL_BLEND, GL.GL_DEPTH_TEST, GL.GL_LEQUAL, GL.GL_TRUE, GL.GL_FALSE, GL.GL_CULL_FACE,
                       GL.GL_BACK, GL.GL_TEXTURE0)  # read once per cache, not once per layer
        self._caps: dict[int, bool] = {}
        self._known: dict = {}
        self._uniforms: dict = {} if uniforms is None else uniforms
        self._token = next(_CACHES)

    def _set(self, key, value) -> bool:
        """Record `value` under `key`; True when it differs from what was set before."""
        if self._known.get(key, _UNSET) == value:
            return False
        self._known[key] = value
        return True

    def enable(self, cap: int, on: bool) -> None:
        on = bool(on)
        if self._caps.get(cap) is not on:
            self._caps[cap] = on
            (self.gl.glEnable if on else self.gl.glDisable)(cap)

    def apply(self, state, depth_test: bool = True, depth_write: bool | None = None, cull: bool = False) -> None:
        """Blending per `state`, depth test (LEQUAL) on or off, depth writes (default: the state's
        own), and back-face culling on or off; skipping what is already set."""
        blend_cap, depth_cap, lequal, true, false, cull_cap, back, _ = self._enums
        gl = self.gl
        self.enable(blend_cap, state.blend is not None)
        if state.blend is not None and self._set("blend", state.blend):
            gl.glBlendFuncSeparate(*blend_factors(state.blend))
        self.enable(depth_cap, depth_test)
        if depth_test:
            self.depth_func(lequal)
        write = state.depth_write if depth_write is None else depth_write
        if self._set("depth_mask", bool(write)):
            gl.glDepthMask(true if write else false)
        self.enable(cull_cap, cull)
        if cull and self._set("cull_face", back):
            gl.glCullFace(back)

    def depth_func(self, func: int) -> None:
        if self._set("depth_func", func):
            self.gl.glDepthFunc(func)

    def use_program(self, program: int) -> None:
        if self._set("program", program):
            self.gl.glUseProgram(program)

    def bind_texture(self, unit: int, target: int, texture: int) -> None:
        """Bind `texture` to `target` of texture unit `unit` (which unit is active afterwards is
        not said: call `active_texture` before anything that depends on it)."""
        if self._set(("texture", unit, target), texture):
            if self._set("active", unit):
                self.gl.glActiveTexture(self._enums[-1] + unit)
            self.gl.glBindTexture(target, texture)

    def active_texture(self, unit: int) -> None:
        if self._set("active", unit):
            self.gl.glActiveTexture(self._enums[-1] + unit)

    def uniform(self, program: int, location: int, setter, *values) -> None:
        """`setter(location, *values)` unless `program` already has these values there."""
        key = (program, location)
        if self._uniforms.get(key, _UNSET) != values:
            self._uniforms[key] = values
            setter(location, *values)

    def uniform_matrix(self, program: int, location: int, setter, matrix, key=None) -> None:
        """A float32 matrix uniform (row-major, transposed by GL) unless already set. `key`, when
        given, stands for the matrix's value while this cache lives (e.g. the index of a texture
        animation within one frame), so an unchanged matrix is not even converted."""
        import numpy as np

        slot = (program, location)
        if key is not None:
            key = ("key", self._token, key)
            if self._uniforms.get(slot, _UNSET) == key:
                return
            m = np.ascontiguousarray(matrix, np.float32)
            self._uniforms[slot] = key
        else:
            m = np.ascontiguousarray(matrix, np.float32)
            data = m.tobytes()
            if self._uniforms.get(slot) == data:
                return
            self._uniforms[slot] = data
        setter(location, 1, 1, ctypes.c_void_p(m.ctypes.data))


_UNSET = object()
