"""GLFW backend: a hidden 1x1 window with a 3.3 core context. Needs a display (X11 or Wayland).

For desktops and CI runners with Xvfb; headless workers use EGL. The window's default
framebuffer is never drawn to: all rendering goes to framebuffer objects, so the window's size
and visibility do not matter. `glfw` (which loads libglfw) is imported only here, inside
`GLFWContext()`. GLFW must be used from the main thread (its rule, not ours), and, like every
backend, only in the process that created the context: create it after a worker starts.

The context is made through the API PyOpenGL is bound to, so that PyOpenGL sees it as current:
when PyOpenGL uses its EGL platform (``PYOPENGL_PLATFORM=egl``) GLFW is asked for an EGL context
(``GLFW_CONTEXT_CREATION_API = GLFW_EGL_CONTEXT_API``, fine on X11 too); otherwise GLFW's native
API (GLX on X11, EGL on Wayland), which matches what PyOpenGL picks by itself from DISPLAY /
WAYLAND_DISPLAY. A process bound to OSMesa cannot use GLFW.
"""

from __future__ import annotations

import threading

from .base import BackendUnavailable, GLContext, GLContextError, has_display, pyopengl_platform

_lock = threading.Lock()
_windows = 0  # live windows; glfw.terminate() when the last one goes


class GLFWContext(GLContext):
    backend = "glfw"

    def __init__(self, version: tuple[int, int] = (3, 3)):
        super().__init__()
        if not has_display():
            raise BackendUnavailable("GLFW needs DISPLAY or WAYLAND_DISPLAY")
        name, _bound = pyopengl_platform()
        if name == "osmesa":
            raise BackendUnavailable("PyOpenGL is bound to OSMesa in this process; GLFW cannot be used")
        try:
            import glfw
        except Exception as exc:  # noqa: BLE001 - ImportError, or libglfw missing
            raise BackendUnavailable(f"cannot import glfw: {exc}") from exc
        self._glfw = glfw
        self.window = None
        global _windows
        with _lock:
            if not glfw.init():
                raise BackendUnavailable(f"glfw.init() failed: {self._glfw_error()}")
            _windows += 1
        try:
            glfw.default_window_hints()
            glfw.window_hint(glfw.VISIBLE, glfw.FALSE)
            glfw.window_hint(glfw.CONTEXT_VERSION_MAJOR, version[0])
            glfw.window_hint(glfw.CONTEXT_VERSION_MINOR, version[1])
            glfw.window_hint(glfw.OPENGL_PROFILE, glfw.OPENGL_CORE_PROFILE)
            glfw.window_hint(glfw.OPENGL_FORWARD_COMPAT, glfw.TRUE)
            if name == "egl":
                glfw.window_hint(glfw.CONTEXT_CREATION_API, glfw.EGL_CONTEXT_API)
            self.window = glfw.create_window(1, 1, "modelfarm", None, None)
            if not self.window:
                raise GLContextError(f"glfw.create_window failed: {self._glfw_error()}")
            glfw.make_context_current(self.window)
            self._finish_creation("glfw")
        except Exception:
            self._release()
            raise

    def _glfw_error(self) -> str:
        try:
            code, desc = self._glfw.get_error()
        except Exception:  # noqa: BLE001
            return "unknown error"
        if isinstance(desc, bytes):
            desc = desc.decode("utf-8", "replace")
        return f"{desc} (0x{code:x})" if code else "no error reported"

    def _make_current(self) -> None:
        self._glfw.make_context_current(self.window)

    def _release(self) -> None:
        global _windows
        glfw = self._glfw
        try:
            if self.window is not None:
                if glfw.get_current_context() == self.window:
                    glfw.make_context_current(None)
                glfw.destroy_window(self.window)
        finally:
            self.window = None
            with _lock:
                _windows -= 1
                if _windows == 0:
                    glfw.terminate()
