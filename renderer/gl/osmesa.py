"""OSMesa backend: Mesa's off-screen library, through PyOpenGL's ``OpenGL.osmesa``.

Legacy and process-bound:

- PyOpenGL chooses its platform once per process, when OpenGL is first imported. OSMesa works
  only in a process where ``PYOPENGL_PLATFORM=osmesa`` was set before that (or where nothing
  has imported OpenGL yet and this backend is the first to be tried: it then sets it). In such
  a process ``create_context("auto")`` tries OSMesa first, and EGL cannot be used at all.
- Mesa 25.1 removed libOSMesa; prefer EGL (surfaceless) everywhere it exists. Debian 12 ships
  it as ``libosmesa6`` (Mesa 22.3).

The context is a 3.3+ core profile (4.5 asked first) made current on a 1x1 RGBA buffer that is
never read: all rendering goes to framebuffer objects. Like every backend, create it in the
worker process after it starts, never before a fork.
"""

from __future__ import annotations

import ctypes
import ctypes.util

from .base import GLContext, GLContextError, claim_pyopengl_platform

GL_VERSIONS = ((4, 5), (3, 3))

# OpenGL/raw/osmesa/mesa.py has these values (its OSMESA_COMPAT_PROFILE is misnamed); keep our own.
OSMESA_RGBA = 0x1908
OSMESA_FORMAT = 0x22
OSMESA_DEPTH_BITS = 0x30
OSMESA_STENCIL_BITS = 0x31
OSMESA_ACCUM_BITS = 0x32
OSMESA_PROFILE = 0x33
OSMESA_CORE_PROFILE = 0x34
OSMESA_CONTEXT_MAJOR_VERSION = 0x36
OSMESA_CONTEXT_MINOR_VERSION = 0x37


def _probe_libosmesa() -> None:
    name = ctypes.util.find_library("OSMesa")
    ctypes.CDLL(name or "libOSMesa.so.8")


class OSMesaContext(GLContext):
    backend = "osmesa"

    def __init__(self, versions=GL_VERSIONS):
        super().__init__()
        claim_pyopengl_platform("osmesa", probe=_probe_libosmesa)
        from OpenGL import GL, osmesa

        self._osmesa = osmesa
        self._buffer = (ctypes.c_ubyte * 4)()
        self.context = None
        last = ""
        for major, minor in versions:
            attribs = [
                OSMESA_FORMAT, OSMESA_RGBA,
                OSMESA_DEPTH_BITS, 24,
                OSMESA_STENCIL_BITS, 8,
                OSMESA_ACCUM_BITS, 0,
                OSMESA_PROFILE, OSMESA_CORE_PROFILE,
                OSMESA_CONTEXT_MAJOR_VERSION, major,
                OSMESA_CONTEXT_MINOR_VERSION, minor,
                0,
            ]  # fmt: skip
            try:
                ctx = osmesa.OSMesaCreateContextAttribs(attribs, None)
            except Exception as exc:  # noqa: BLE001 - reported below
                last = f"{major}.{minor} core: {type(exc).__name__}: {exc}"
                continue
            if not ctx:
                last = f"{major}.{minor} core: OSMesaCreateContextAttribs returned NULL"
                continue
            self.context = ctx
            break
        else:
            raise GLContextError(f"OSMesa could not create a core context ({last})")
        try:
            self._make_current_raw(GL)
            self._finish_creation("osmesa")
        except Exception:
            self._release()
            raise

    def _make_current_raw(self, GL) -> None:
        ok = self._osmesa.OSMesaMakeCurrent(self.context, self._buffer, GL.GL_UNSIGNED_BYTE, 1, 1)
        if not ok:
            raise GLContextError("OSMesaMakeCurrent failed")

    def _make_current(self) -> None:
        from OpenGL import GL

        self._make_current_raw(GL)

    def _release(self) -> None:
        if self.context is None:
            return
        try:
            self._osmesa.OSMesaDestroyContext(self.context)
        finally:
            self.context = None
