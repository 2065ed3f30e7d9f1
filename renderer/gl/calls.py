"""The GL calls of the per-frame draw loops, without PyOpenGL's per-call error check.

PyOpenGL runs glGetError after every call and routes array arguments through its converters. In
this process the check cannot be switched off (`PYOPENGL_ERROR_CHECKING=0` breaks PyOpenGL 3.1's
EGL bindings), and in the layer loop it is about half of a call's Python cost. `fast()` gives the
loop's entry points as bare ctypes functions: scalar arguments as they are, pointer arguments as
`ctypes.c_void_p` (of `array.ctypes.data`, or of a byte offset into a bound buffer). The loop then
calls `check` once after its draws, so a GL error still fails the frame, naming the step.

``RENDERER_GL_CHECK=1`` in the environment makes `fast()` return PyOpenGL's own checked functions
instead (the same arguments work: PyOpenGL takes a c_void_p as a pointer, where it would read a
plain integer as a value), to find the call that failed; the frames are the same bytes. The choice
is read once per process, when `fast()` is first called.
"""

from __future__ import annotations

import ctypes
import os
from types import SimpleNamespace

CHECK_ENV = "RENDERER_GL_CHECK"

# name -> argument types of the bare function (None: the GL function's own scalar types).
_POINTER = ctypes.c_void_p
_CALLS: dict[str, tuple | None] = {
    "glActiveTexture": None,
    "glBindBuffer": None,
    "glBindFramebuffer": None,
    "glBindTexture": None,
    "glBindVertexArray": None,
    "glBufferData": (ctypes.c_uint, ctypes.c_ssize_t, _POINTER, ctypes.c_uint),
    "glBufferSubData": (ctypes.c_uint, ctypes.c_ssize_t, ctypes.c_ssize_t, _POINTER),
    "glBlendFuncSeparate": None,
    "glClear": None,
    "glClearColor": None,
    "glClearDepth": None,
    "glClearStencil": None,
    "glColorMask": None,
    "glCullFace": None,
    "glDepthFunc": None,
    "glDepthMask": None,
    "glDisable": None,
    "glDrawArrays": None,
    "glDrawArraysInstanced": None,
    "glDrawElements": (ctypes.c_uint, ctypes.c_int, ctypes.c_uint, _POINTER),
    "glEnable": None,
    "glFlush": None,
    "glFrontFace": None,
    "glGetIntegerv": (ctypes.c_uint, _POINTER),
    "glPixelStorei": None,
    "glReadBuffer": None,
    "glReadPixels": (ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_uint, ctypes.c_uint, _POINTER),
    "glStencilMask": None,
    "glTexBuffer": None,
    "glViewport": None,
    "glUniform1f": None,
    "glUniform1i": None,
    "glUniform3f": None,
    "glUniform4f": None,
    "glUniformMatrix3fv": (ctypes.c_int, ctypes.c_int, ctypes.c_ubyte, _POINTER),
    "glUniformMatrix4fv": (ctypes.c_int, ctypes.c_int, ctypes.c_ubyte, _POINTER),
    "glUseProgram": None,
    "glVertexAttribPointer": (ctypes.c_uint, ctypes.c_int, ctypes.c_uint, ctypes.c_ubyte, ctypes.c_int, _POINTER),
}

_fast: SimpleNamespace | None = None


def checking() -> bool:
    """Whether RENDERER_GL_CHECK asks for PyOpenGL's per-call error check."""
    return os.environ.get(CHECK_ENV, "").strip().lower() not in ("", "0", "false", "no", "off")


def _bare(gl, name: str, argtypes):
    """`name` as a plain ctypes function of the platform's GL library: no error check, no
    argument conversion (PyOpenGL's own constructor would turn void pointers into its array type)."""
    from OpenGL import platform
    from OpenGL.platform import ctypesloader

    fn = getattr(gl, name)
    base = fn
    while hasattr(base, "wrappedOperation"):  # a Wrapper's C function
        base = base.wrappedOperation
    dll = platform.PLATFORM.GL
    # Every function in the table returns void; PyOpenGL's Python-level wrappers (glReadPixels,
    # glGetIntegerv) carry no ctypes types, so the table gives their argument types.
    prototype = platform.PLATFORM.functionTypeFor(dll)(
        getattr(base, "restype", None), *(argtypes if argtypes is not None else base.argtypes))
    return ctypesloader.buildFunction(prototype, name, dll)


def fast() -> SimpleNamespace:
    """The draw loops' GL functions (attributes named as in OpenGL.GL), unchecked unless
    RENDERER_GL_CHECK is set; built on first use, in the process that renders."""
    global _fast
    if _fast is None:
        from OpenGL import GL

        if checking():
            _fast = SimpleNamespace(**{name: getattr(GL, name) for name in _CALLS}, checked=True)
        else:
            _fast = SimpleNamespace(**{name: _bare(GL, name, types) for name, types in _CALLS.items()}, checked=False)
    return _fast


def get_integer(pname: int) -> int:
    """glGetIntegerv of one value, through `fast()` (PyOpenGL's own when checking)."""
    gl = fast()
    if gl.checked:
        return int(gl.glGetIntegerv(pname))
    value = ctypes.c_int(0)
    gl.glGetIntegerv(pname, ctypes.c_void_p(ctypes.addressof(value)))
    return value.value


class GLCallError(RuntimeError):
    """A GL error raised by an unchecked call of a draw loop (found by `check`)."""


_ERRORS = {0x0500: "GL_INVALID_ENUM", 0x0501: "GL_INVALID_VALUE", 0x0502: "GL_INVALID_OPERATION",
           0x0505: "GL_OUT_OF_MEMORY", 0x0506: "GL_INVALID_FRAMEBUFFER_OPERATION"}


def check(step: str) -> None:
    """Raise GLCallError if a GL error is pending after `step` (every pending error is read and
    named, so the next frame starts clean)."""
    from OpenGL import GL

    get = GL.glGetError
    found = []
    for _ in range(16):  # GL keeps at most one flag per error kind
        err = int(get())
        if err == 0:
            break
        found.append(_ERRORS.get(err, hex(err)))
    if found:
        raise GLCallError(f"GL error after {step}: {', '.join(found)} (set {CHECK_ENV}=1 to find the call)")
