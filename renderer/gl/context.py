"""Offscreen OpenGL contexts behind one small interface.

    ctx = create_context()          # "auto": EGL, then OSMesa, then a hidden GLFW window
    print(ctx.info.as_dict())       # GL_RENDERER, Mesa version, CPU vendor, GL_MAX_SAMPLES ...
    ...                             # draw into a renderer.gl.framebuffer.Framebuffer
    ctx.release()

The renderer never learns which backend it got: every backend renders into framebuffer objects,
never into a window or a default framebuffer, so the pixels depend only on the GL implementation
(recorded in `GLInfo`), not on the backend that created the context.

Backends (one module each):

- ``egl`` (`renderer.gl.egl`): an EGL device (a GPU) when one is enumerated, otherwise Mesa's
  surfaceless platform (llvmpipe on a machine without a GPU). No window system, no surface.
- ``osmesa`` (`renderer.gl.osmesa`): Mesa's off-screen library. Legacy: Mesa 25.1 removed it.
- ``glfw`` (`renderer.gl.glfw_window`): a hidden GLFW window; needs a display (X11/Wayland).

PyOpenGL and the platform it binds
----------------------------------
PyOpenGL chooses its platform (where ``glClear`` and friends are looked up: EGL, OSMesa or GLX)
**once per process**, the first time ``OpenGL.platform`` is imported, from the environment
variable ``PYOPENGL_PLATFORM``. So:

- OSMesa works only in a process where ``PYOPENGL_PLATFORM=osmesa`` was set before anything
  imported OpenGL. In such a process "auto" tries OSMesa first (and EGL then fails, because
  PyOpenGL is bound to OSMesa).
- In every other process "auto" tries EGL first. When ``PYOPENGL_PLATFORM`` is unset and OpenGL
  has not been imported yet, the backend that is tried sets it (``egl`` for EGL, ``osmesa`` for
  OSMesa) just before importing OpenGL, after checking that its library can be loaded at all.
- A backend whose platform conflicts with the one PyOpenGL is (or will be) bound to fails with
  a reason saying so; "auto" moves on to the next backend.

Worker-process lifecycle
------------------------
A GL context belongs to the process (and thread) that created it. Create contexts inside each
worker process after it has started (for Celery: in ``worker_process_init``), never at import
time and never in a parent process before it forks: EGL/llvmpipe state inherited across a fork
makes context creation in the children hang (moderngl#414). Nothing in ``renderer.gl`` touches
GL, EGL or OSMesa when it is imported; drivers load on the first `create_context` call. Set
``LP_NUM_THREADS`` (see `renderer.gl.threads`) before that call. A context refuses to be used
in a process other than the one that created it. Call `GLContext.release` on worker shutdown;
the EGL backend never calls ``eglTerminate`` (it would destroy every context on the display).
A context is current on one thread at a time: use it from the thread that created it, or call
`make_current` on the thread that will draw.
"""

from __future__ import annotations

from .base import (  # noqa: F401 - re-exported: the interface and errors callers know from here
    BACKENDS,
    BackendUnavailable,
    GLContext,
    GLContextError,
    GLInfo,
    claim_pyopengl_platform,
    cpu_vendor,
    has_display,
    parse_driver_version,
    pyopengl_platform,
    query_gl_info,
)


def auto_order() -> list[str]:
    """The backends "auto" tries, in order, for this process."""
    name, _bound = pyopengl_platform()
    if name == "osmesa":
        return ["osmesa", "egl", "glfw"]
    return ["egl", "osmesa", "glfw"]


def create_context(backend: str = "auto", *, device_index: int | None = None) -> GLContext:
    """Create an offscreen context and make it current on the calling thread.

    `backend` is "auto", "egl", "osmesa" or "glfw". "auto" tries the backends in `auto_order()`
    (GLFW only when DISPLAY or WAYLAND_DISPLAY is set) and raises one `GLContextError` naming
    every backend and why it failed. `device_index` (EGL only) picks an entry of
    ``eglQueryDevicesEXT``'s list instead of the first GPU.
    """
    if backend == "auto":
        order = auto_order()
    elif backend in BACKENDS:
        order = [backend]
    else:
        raise ValueError(f"unknown GL backend {backend!r}; expected 'auto' or one of {BACKENDS}")

    failures: list[tuple[str, str]] = []
    for name in order:
        if name == "glfw" and backend == "auto" and not has_display():
            failures.append((name, "not tried: neither DISPLAY nor WAYLAND_DISPLAY is set"))
            continue
        try:
            return _create_one(name, device_index)
        except Exception as exc:  # noqa: BLE001 - every failure is reported below
            failures.append((name, f"{type(exc).__name__}: {exc}"))
    lines = "\n".join(f"  {name}: {reason}" for name, reason in failures)
    raise GLContextError(f"no OpenGL context could be created (backend={backend!r}):\n{lines}", failures)


def _create_one(name: str, device_index: int | None) -> GLContext:
    if name == "egl":
        # each backend loads its own GL library (libEGL, libOSMesa, glfw): only the one picked
        from .egl import EGLContext

        return EGLContext(device_index=device_index)
    if name == "osmesa":
        # each backend loads its own GL library (libEGL, libOSMesa, glfw): only the one picked
        from .osmesa import OSMesaContext

        return OSMesaContext()
    # each backend loads its own GL library (libEGL, libOSMesa, glfw): only the one picked
    from .glfw_window import GLFWContext

    return GLFWContext()
