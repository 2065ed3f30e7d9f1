"""EGL backend: a GL core context with no surface, on a GPU device or on Mesa's surfaceless platform.

Display choice, in order:

1. ``EGL_EXT_device_enumeration`` + ``EGL_EXT_platform_device``: the first device that is not
   Mesa's software device (``EGL_MESA_device_software``), i.e. a GPU (NVIDIA via libglvnd's
   vendor JSON, or a Mesa DRM render node). ``device_index`` picks a device explicitly.
2. Mesa's surfaceless platform: ``eglGetPlatformDisplayEXT(EGL_PLATFORM_SURFACELESS_MESA,
   EGL_DEFAULT_DISPLAY)`` (llvmpipe when there is no GPU).
3. ``eglGetDisplay(EGL_DEFAULT_DISPLAY)`` with ``EGL_PLATFORM=surfaceless`` (set when unset).

A display that fails to initialise or to give a context is skipped (recorded in
`EGLContext.attempts`). The context is OpenGL (``eglBindAPI(EGL_OPENGL_API)``), core profile,
4.5 when available, else 3.3, and is made current with ``EGL_NO_SURFACE`` (needs
``EGL_KHR_surfaceless_context``).

This module imports nothing from OpenGL at import time; everything happens in `EGLContext()`.
It needs PyOpenGL bound to its EGL platform (``PYOPENGL_PLATFORM=egl``, set automatically when
unset and OpenGL has not been imported yet; see `renderer.gl.context`). Contexts are per process:
create them in a worker after it starts, never before a fork. ``eglTerminate`` is never called:
it would destroy every other context on the same display (pyrender#223); displays live until
the process exits.
"""

from __future__ import annotations

import ctypes
import logging
import os

from .base import BackendUnavailable, GLContext, GLContextError, claim_pyopengl_platform

log = logging.getLogger(__name__)

EGL_PLATFORM_DEVICE_EXT = 0x313F
EGL_PLATFORM_SURFACELESS_MESA = 0x31DD
EGL_DRM_DEVICE_FILE_EXT = 0x3233
EGL_DRM_RENDER_NODE_FILE_EXT = 0x3377
EGL_CONTEXT_MAJOR_VERSION = 0x3098
EGL_CONTEXT_MINOR_VERSION = 0x30FB
EGL_CONTEXT_OPENGL_PROFILE_MASK = 0x30FD
EGL_CONTEXT_OPENGL_CORE_PROFILE_BIT = 0x00000001

GL_VERSIONS = ((4, 5), (3, 3))

_EGL_ERRORS = {
    0x3000: "EGL_SUCCESS",
    0x3001: "EGL_NOT_INITIALIZED",
    0x3002: "EGL_BAD_ACCESS",
    0x3003: "EGL_BAD_ALLOC",
    0x3004: "EGL_BAD_ATTRIBUTE",
    0x3005: "EGL_BAD_CONFIG",
    0x3006: "EGL_BAD_CONTEXT",
    0x3007: "EGL_BAD_CURRENT_SURFACE",
    0x3008: "EGL_BAD_DISPLAY",
    0x3009: "EGL_BAD_MATCH",
    0x300A: "EGL_BAD_NATIVE_PIXMAP",
    0x300B: "EGL_BAD_NATIVE_WINDOW",
    0x300C: "EGL_BAD_PARAMETER",
    0x300D: "EGL_BAD_SURFACE",
    0x300E: "EGL_CONTEXT_LOST",
    0x322B: "EGL_BAD_DEVICE_EXT",
}


def _probe_libegl() -> None:
    ctypes.CDLL("libEGL.so.1")


def _egl_error_name(code) -> str:
    code = int(code)
    return _EGL_ERRORS.get(code, hex(code))


def _last_error() -> str:
    from OpenGL import EGL

    return _egl_error_name(EGL.eglGetError())


def _call(what: str, fn, *args):
    """Call an EGL function; PyOpenGL raises EGLError for some failures, returns false for others."""
    from OpenGL import EGL

    try:
        result = fn(*args)
    except EGL.EGLError as exc:
        raise GLContextError(f"{what} failed: {_egl_error_name(getattr(exc, 'err', 0))}") from exc
    if not result:
        raise GLContextError(f"{what} failed: {_last_error()}")
    return result


_GET_CURRENT = []


def _current_context() -> int | None:
    """eglGetCurrentContext of this thread, as an address: a bare ctypes call (about 1 us; through
    PyOpenGL's wrapper and a cast, 30 us)."""
    if not _GET_CURRENT:
        from OpenGL import platform

        _GET_CURRENT.append(ctypes.CFUNCTYPE(ctypes.c_void_p)(("eglGetCurrentContext", platform.PLATFORM.EGL)))
    return _GET_CURRENT[0]()


def _handle_is_null(handle) -> bool:
    if handle is None:
        return True
    try:
        return not ctypes.cast(handle, ctypes.c_void_p).value
    except (TypeError, ctypes.ArgumentError):
        return not bool(handle)


def _split(ext) -> set[str]:
    if not ext:
        return set()
    if isinstance(ext, bytes):
        ext = ext.decode("ascii", "replace")
    return set(ext.split())


def client_extensions() -> set[str]:
    from OpenGL import EGL

    try:
        return _split(EGL.eglQueryString(EGL.EGL_NO_DISPLAY, EGL.EGL_EXTENSIONS))
    except EGL.EGLError:
        return set()  # EGL 1.4 without EGL_EXT_client_extensions


class EGLDeviceInfo:
    """One entry of ``eglQueryDevicesEXT``: the handle, its extensions and its DRM node."""

    def __init__(self, index: int, handle, extensions: set[str], node: str):
        self.index = index
        self.handle = handle
        self.extensions = extensions
        self.node = node

    @property
    def is_software(self) -> bool:
        return "EGL_MESA_device_software" in self.extensions

    def describe(self) -> str:
        kind = "software" if self.is_software else "gpu"
        return f"device {self.index} ({kind}{', ' + self.node if self.node else ''})"


def query_devices() -> list[EGLDeviceInfo]:
    """Devices from ``eglQueryDevicesEXT`` (empty when the extension is missing)."""
    from OpenGL import EGL

    if "EGL_EXT_device_enumeration" not in client_extensions() and ("EGL_EXT_device_base" not in client_extensions()):
        return []
    from OpenGL.EGL.EXT.device_enumeration import eglQueryDevicesEXT
    from OpenGL.EGL.EXT.device_query import eglQueryDeviceStringEXT

    count = EGL.EGLint()
    if not eglQueryDevicesEXT(0, None, ctypes.pointer(count)) or count.value <= 0:
        return []
    handles = (EGL.EGLDeviceEXT * count.value)()
    if not eglQueryDevicesEXT(count.value, handles, ctypes.pointer(count)):
        return []
    devices = []
    for i in range(count.value):
        handle = handles[i]
        try:
            ext = _split(eglQueryDeviceStringEXT(handle, EGL.EGL_EXTENSIONS))
        except EGL.EGLError:
            ext = set()
        node = ""
        for name, wanted in (
            (EGL_DRM_RENDER_NODE_FILE_EXT, "EGL_EXT_device_drm_render_node"),
            (EGL_DRM_DEVICE_FILE_EXT, "EGL_EXT_device_drm"),
        ):
            if wanted not in ext:
                continue
            try:
                value = eglQueryDeviceStringEXT(handle, name)
            except EGL.EGLError:
                value = None
            if value:
                node = value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)
                break
        devices.append(EGLDeviceInfo(i, handle, ext, node))
    return devices


class EGLContext(GLContext):
    """An EGL context with no surface; see the module docstring for how the display is chosen."""

    backend = "egl"

    def __init__(self, device_index: int | None = None, versions=GL_VERSIONS):
        super().__init__()
        claim_pyopengl_platform("egl", probe=_probe_libegl)
        from OpenGL import EGL

        self._EGL = EGL
        self.display = None
        self.context = None
        self.config = None
        #: (display description, reason) for every display that was tried and failed.
        self.attempts: list[tuple[str, str]] = []

        for description, get_display in self._candidate_displays(device_index):
            try:
                display = get_display()
                self._create_on(display, versions)
            except Exception as exc:  # noqa: BLE001 - try the next display, report all
                reason = str(exc) if isinstance(exc, GLContextError) else f"{type(exc).__name__}: {exc}"
                self.attempts.append((description, reason))
                log.info("EGL: %s: %s", description, reason)
                continue
            self._platform = description
            break
        else:
            tried = "; ".join(f"{d}: {r}" for d, r in self.attempts) or "no EGL display candidates"
            raise GLContextError(f"no EGL display gave a context ({tried})")
        try:
            self._finish_creation(self._platform)
        except Exception:
            self._release()
            raise
        if self.attempts:
            log.warning("EGL context on %s after failures: %s", self._platform, self.attempts)

    # -- display candidates ------------------------------------------------------------------

    def _candidate_displays(self, device_index: int | None):
        EGL = self._EGL
        client = client_extensions()
        candidates = []
        if "EGL_EXT_platform_device" in client and "EGL_EXT_platform_base" in client:
            try:
                devices = query_devices()
            except Exception as exc:  # noqa: BLE001 - enumeration is optional
                self.attempts.append(("device enumeration", f"{type(exc).__name__}: {exc}"))
                devices = []
            if device_index is not None:
                if not 0 <= device_index < len(devices):
                    raise BackendUnavailable(f"EGL device_index {device_index} out of range: {len(devices)} device(s)")
                chosen = [devices[device_index]]
            else:
                chosen = [d for d in devices if not d.is_software][:1]
            for dev in chosen:
                label = "device:" + (dev.node or str(dev.index))
                candidates.append((label, self._platform_display(EGL_PLATFORM_DEVICE_EXT, dev.handle)))
        elif device_index is not None:
            raise BackendUnavailable("EGL device_index given but EGL_EXT_platform_device is missing")

        if device_index is None:
            if "EGL_MESA_platform_surfaceless" in client and "EGL_EXT_platform_base" in client:
                candidates.append(
                    ("surfaceless", self._platform_display(EGL_PLATFORM_SURFACELESS_MESA, EGL.EGL_DEFAULT_DISPLAY))
                )

            def default_display():
                os.environ.setdefault("EGL_PLATFORM", "surfaceless")
                return EGL.eglGetDisplay(EGL.EGL_DEFAULT_DISPLAY)

            candidates.append(("default-display", default_display))
        return candidates

    def _platform_display(self, platform: int, native):
        def get():
            from OpenGL.EGL.EXT.platform_base import eglGetPlatformDisplayEXT

            return eglGetPlatformDisplayEXT(platform, native, None)

        return get

    # -- context creation --------------------------------------------------------------------

    def _create_on(self, display, versions) -> None:
        EGL = self._EGL
        if _handle_is_null(display):
            raise GLContextError(f"no display ({_last_error()})")
        major, minor = EGL.EGLint(), EGL.EGLint()
        _call("eglInitialize", EGL.eglInitialize, display, ctypes.pointer(major), ctypes.pointer(minor))
        extensions = _split(EGL.eglQueryString(display, EGL.EGL_EXTENSIONS))
        if "EGL_KHR_surfaceless_context" not in extensions:
            raise GLContextError("display lacks EGL_KHR_surfaceless_context")
        if "EGL_KHR_create_context" not in extensions and (major.value, minor.value) < (1, 5):
            raise GLContextError("display lacks EGL_KHR_create_context (needed for a core profile)")
        _call("eglBindAPI(EGL_OPENGL_API)", EGL.eglBindAPI, EGL.EGL_OPENGL_API)
        config = self._choose_config(display, extensions)

        last = ""
        for gl_major, gl_minor in versions:
            attribs = (EGL.EGLint * 7)(
                EGL_CONTEXT_MAJOR_VERSION,
                gl_major,
                EGL_CONTEXT_MINOR_VERSION,
                gl_minor,
                EGL_CONTEXT_OPENGL_PROFILE_MASK,
                EGL_CONTEXT_OPENGL_CORE_PROFILE_BIT,
                EGL.EGL_NONE,
            )
            try:
                context = EGL.eglCreateContext(display, config, EGL.EGL_NO_CONTEXT, attribs)
            except EGL.EGLError as exc:
                last = f"{gl_major}.{gl_minor} core: {_egl_error_name(getattr(exc, 'err', 0))}"
                continue
            if _handle_is_null(context):
                last = f"{gl_major}.{gl_minor} core: {_last_error()}"
                continue
            try:
                _call(
                    "eglMakeCurrent(EGL_NO_SURFACE)",
                    EGL.eglMakeCurrent,
                    display,
                    EGL.EGL_NO_SURFACE,
                    EGL.EGL_NO_SURFACE,
                    context,
                )
            except GLContextError as exc:
                EGL.eglDestroyContext(display, context)
                last = f"{gl_major}.{gl_minor} core: {exc}"
                continue
            self.display, self.context, self.config = display, context, config
            return
        raise GLContextError(f"eglCreateContext failed for every version asked ({last})")

    def _choose_config(self, display, extensions):
        EGL = self._EGL
        wishes = [
            [
                EGL.EGL_RED_SIZE, 8, EGL.EGL_GREEN_SIZE, 8, EGL.EGL_BLUE_SIZE, 8, EGL.EGL_ALPHA_SIZE, 8,
                EGL.EGL_DEPTH_SIZE, 24, EGL.EGL_STENCIL_SIZE, 8,
                EGL.EGL_SURFACE_TYPE, EGL.EGL_PBUFFER_BIT,
                EGL.EGL_RENDERABLE_TYPE, EGL.EGL_OPENGL_BIT,
                EGL.EGL_NONE,
            ],
            [EGL.EGL_RENDERABLE_TYPE, EGL.EGL_OPENGL_BIT, EGL.EGL_NONE],
        ]  # fmt: skip
        for wish in wishes:
            attribs = (EGL.EGLint * len(wish))(*wish)
            config = EGL.EGLConfig()
            count = EGL.EGLint()
            try:
                ok = EGL.eglChooseConfig(display, attribs, ctypes.pointer(config), 1, ctypes.pointer(count))
            except EGL.EGLError:
                ok = False
            if ok and count.value > 0:
                return config
        if "EGL_KHR_no_config_context" in extensions:
            return EGL.EGLConfig()  # EGL_NO_CONFIG_KHR: we never render to a surface anyway
        raise GLContextError(f"eglChooseConfig found no OpenGL config ({_last_error()})")

    # -- GLContext ---------------------------------------------------------------------------

    def _make_current(self) -> None:
        EGL = self._EGL
        mine = self.__dict__.get("_context_id")
        if mine is None:
            mine = self._context_id = ctypes.cast(self.context, ctypes.c_void_p).value
        if mine and _current_context() == mine:
            return  # current on this thread already (a frame asks every time: the calls took 70 us)
        EGL.eglBindAPI(EGL.EGL_OPENGL_API)  # the bound API is per thread
        _call(
            "eglMakeCurrent",
            EGL.eglMakeCurrent,
            self.display,
            EGL.EGL_NO_SURFACE,
            EGL.EGL_NO_SURFACE,
            self.context,
        )

    def _release(self) -> None:
        EGL = self._EGL
        if self.context is None:
            return
        try:
            current = EGL.eglGetCurrentContext()
            if ctypes.cast(current, ctypes.c_void_p).value == ctypes.cast(self.context, ctypes.c_void_p).value:
                EGL.eglMakeCurrent(self.display, EGL.EGL_NO_SURFACE, EGL.EGL_NO_SURFACE, EGL.EGL_NO_CONTEXT)
            EGL.eglDestroyContext(self.display, self.context)
        finally:
            self.context = None
