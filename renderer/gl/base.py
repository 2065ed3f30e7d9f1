"""The GL context interface every backend implements, and what the renderer learns about GL.

`GLContext` (the interface), `GLInfo` (GL_RENDERER, driver and Mesa versions, CPU vendor,
GL_MAX_SAMPLES), the errors, and the rules for PyOpenGL's per-process platform binding live here;
the backends (egl, osmesa, glfw_window) import this module and `renderer.gl.context` picks one.
Nothing here loads a GL library at import time.
"""

from __future__ import annotations

import abc
import ctypes
import os
import platform as _platform
import re
import sys
from dataclasses import asdict, dataclass

BACKENDS = ("egl", "osmesa", "glfw")


class GLContextError(RuntimeError):
    """A GL context could not be created or used.

    `failures` lists ``(backend, reason)`` for every backend that was tried (one entry when a
    single backend was asked for).
    """

    def __init__(self, message: str, failures: list[tuple[str, str]] | None = None):
        self.failures = list(failures or [])
        super().__init__(message)


class BackendUnavailable(GLContextError):
    """This backend cannot work in this process or on this machine (missing library, no
    display, PyOpenGL bound to another platform). "auto" moves on to the next backend."""


@dataclass(frozen=True)
class GLInfo:
    """What decides the pixels, as far as the GL implementation goes.

    `driver` is "Mesa" or "NVIDIA" when GL_VERSION names one, else ""; `driver_version` is the
    version that follows it in GL_VERSION ("22.3.6", "23.2.0-devel"), else "". `cpu_vendor` is
    /proc/cpuinfo's ``vendor_id`` (GenuineIntel, AuthenticAMD), else `platform.processor()`,
    else `platform.machine()`. `platform` says how the backend reached the implementation
    ("surfaceless", "device:/dev/dri/renderD128", "default-display", "osmesa", "glfw").
    """

    backend: str
    platform: str
    vendor: str
    renderer: str
    version: str
    glsl_version: str
    driver: str
    driver_version: str
    cpu_vendor: str
    max_samples: int

    KEYS = (
        "backend",
        "platform",
        "vendor",
        "renderer",
        "version",
        "glsl_version",
        "driver",
        "driver_version",
        "cpu_vendor",
        "max_samples",
    )

    def as_dict(self) -> dict:
        """Plain dict with the keys in `KEYS` order (stable; safe to put in trace metadata)."""
        d = asdict(self)
        return {key: d[key] for key in self.KEYS}

    @property
    def is_software(self) -> bool:
        """True for Mesa's CPU rasterisers (llvmpipe, softpipe, swrast, lavapipe-style names)."""
        r = self.renderer.lower()
        return any(word in r for word in ("llvmpipe", "softpipe", "swrast", "software"))


_DRIVER_RE = (
    ("Mesa", re.compile(r"\bMesa\s+(\d+\.\d+(?:\.\d+)?(?:-[0-9A-Za-z.]+)?)")),
    ("NVIDIA", re.compile(r"\bNVIDIA\s+(\d+(?:\.\d+)+)")),
)


def parse_driver_version(gl_version: str) -> tuple[str, str]:
    """``"4.5 (Core Profile) Mesa 22.3.6"`` -> ``("Mesa", "22.3.6")``; unknown -> ``("", "")``."""
    for name, pattern in _DRIVER_RE:
        m = pattern.search(gl_version or "")
        if m:
            return name, m.group(1)
    return "", ""


def cpu_vendor(cpuinfo_path: str = "/proc/cpuinfo") -> str:
    """The CPU vendor id: llvmpipe output differs between Intel and AMD, so it is in trace keys."""
    try:
        with open(cpuinfo_path, encoding="utf-8", errors="replace") as f:
            for line in f:
                key, sep, value = line.partition(":")
                if sep and key.strip() == "vendor_id" and value.strip():
                    return value.strip()
    except OSError:
        pass
    return _platform.processor() or _platform.machine() or "unknown"


# ---------------------------------------------------------------------------------------------
# PyOpenGL platform bookkeeping (see the module docstring)

_PLATFORM_CLASS_NAMES = {
    "EGLPlatform": "egl",
    "OSMesaPlatform": "osmesa",
    "GLXPlatform": "glx",
    "Win32Platform": "nt",
    "DarwinPlatform": "darwin",
}
_ENV_ALIASES = {"wayland": "egl", "xwayland": "egl", "linux": "glx", "posix": "glx"}


def pyopengl_platform() -> tuple[str | None, bool]:
    """``(name, bound)``: the PyOpenGL platform of this process and whether it is already fixed.

    `bound` is True once ``OpenGL.platform`` has been imported; the name is then what PyOpenGL
    actually loaded. Before that, the name is what ``PYOPENGL_PLATFORM`` asks for (None: unset).
    """
    mod = sys.modules.get("OpenGL.platform")
    plat = getattr(mod, "PLATFORM", None) if mod is not None else None
    if plat is not None:
        cls = type(plat).__name__
        return _PLATFORM_CLASS_NAMES.get(cls, cls.lower()), True
    env = os.environ.get("PYOPENGL_PLATFORM")
    if not env:
        return None, False
    env = env.strip().lower()
    return _ENV_ALIASES.get(env, env), False


def claim_pyopengl_platform(wanted: str, probe=None) -> None:
    """Make sure PyOpenGL is, or will be, bound to `wanted` ("egl" or "osmesa").

    Raises `BackendUnavailable` when the process is already bound (or asked) to another
    platform. When nothing has been decided yet, calls `probe()` (which should raise OSError if
    the backend's library cannot be loaded) before setting ``PYOPENGL_PLATFORM``, so a failed
    backend does not lock the process out of the next one.
    """
    name, bound = pyopengl_platform()
    if name == wanted:
        return
    if bound:
        raise BackendUnavailable(
            f"PyOpenGL is already bound to the {name!r} platform in this process (it is chosen once,"
            f" when OpenGL is first imported); {wanted!r} needs PYOPENGL_PLATFORM={wanted} set before"
            " anything imports OpenGL"
        )
    if name is not None:
        raise BackendUnavailable(
            f"PYOPENGL_PLATFORM={os.environ.get('PYOPENGL_PLATFORM')} in this process; the {wanted}"
            f" backend needs PYOPENGL_PLATFORM={wanted}"
        )
    if probe is not None:
        try:
            probe()
        except OSError as exc:
            raise BackendUnavailable(f"cannot load the {wanted} library: {exc}") from exc
    os.environ["PYOPENGL_PLATFORM"] = wanted


def has_display() -> bool:
    return bool(os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY"))


# ---------------------------------------------------------------------------------------------


class GLContext(abc.ABC):
    """One offscreen GL 3.3+ core context. Render into `Framebuffer`s, never the default one.

    A new context is current on the creating thread. `release()` unbinds and destroys it (safe
    to call twice). As a context manager, ``with create_context() as ctx:`` makes it current on
    entry and releases it on exit.
    """

    backend: str = ""

    def __init__(self) -> None:
        self._pid = os.getpid()
        self._released = False
        self._info: GLInfo | None = None

    @property
    def info(self) -> GLInfo:
        if self._info is None:
            raise GLContextError(f"{self.backend}: context has no GLInfo (creation did not finish)")
        return self._info

    @property
    def released(self) -> bool:
        return self._released

    def make_current(self) -> None:
        """Bind this context to the calling thread."""
        self._check_usable()
        self._make_current()

    def release(self) -> None:
        """Unbind (if current) and destroy the context. Idempotent."""
        if self._released:
            return
        self._released = True
        if os.getpid() != self._pid:
            return  # a forked child must not touch its parent's driver state
        self._release()

    def _check_usable(self) -> None:
        if self._released:
            raise GLContextError(f"{self.backend}: context was released")
        if os.getpid() != self._pid:
            raise GLContextError(
                f"{self.backend}: context was created in process {self._pid} and cannot be used in"
                f" process {os.getpid()}; create contexts in each worker after it starts"
            )

    def _finish_creation(self, platform: str) -> None:
        """Subclasses call this once the context is current: checks that PyOpenGL sees it as
        current (it asks its own platform: eglGetCurrentContext, glXGetCurrentContext, ...), then
        records `info`."""
        from OpenGL import platform as gl_platform

        if not _pointer_value(gl_platform.PLATFORM.GetCurrentContext()):
            name, _bound = pyopengl_platform()
            raise BackendUnavailable(
                f"{self.backend}: the new context is not current as seen by PyOpenGL's {name} platform"
            )
        self._info = query_gl_info(self.backend, platform)

    @abc.abstractmethod
    def _make_current(self) -> None: ...

    @abc.abstractmethod
    def _release(self) -> None: ...

    def __enter__(self) -> GLContext:
        self.make_current()
        return self

    def __exit__(self, *exc) -> None:
        self.release()

    def __repr__(self) -> str:
        state = "released" if self._released else (self._info.renderer if self._info else "creating")
        return f"<{type(self).__name__} {self.backend} {state}>"


def _pointer_value(handle) -> int:
    if not handle:
        return 0
    try:
        return ctypes.cast(handle, ctypes.c_void_p).value or 0
    except (TypeError, ctypes.ArgumentError):
        return int(bool(handle))


def query_gl_info(backend: str, platform: str) -> GLInfo:
    """Read the GL strings and limits of the current context."""
    from OpenGL import GL

    def string(name) -> str:
        value = GL.glGetString(name)
        if not value:
            return ""
        return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)

    version = string(GL.GL_VERSION)
    driver, driver_version = parse_driver_version(version)
    return GLInfo(
        backend=backend,
        platform=platform,
        vendor=string(GL.GL_VENDOR),
        renderer=string(GL.GL_RENDERER),
        version=version,
        glsl_version=string(GL.GL_SHADING_LANGUAGE_VERSION),
        driver=driver,
        driver_version=driver_version,
        cpu_vendor=cpu_vendor(),
        max_samples=int(GL.glGetIntegerv(GL.GL_MAX_SAMPLES)),
    )
