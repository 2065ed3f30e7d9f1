"""Offscreen OpenGL: contexts (EGL, OSMesa, GLFW) behind one interface, framebuffers, shaders.

Importing this package loads no GL, EGL or OSMesa library and creates nothing: create the
context inside each worker process, after it starts (see `renderer.gl.context`).
"""

from .context import (
    BackendUnavailable,
    GLContext,
    GLContextError,
    GLInfo,
    create_context,
)
from .threads import llvmpipe_threads, set_llvmpipe_threads

__all__ = [
    "BackendUnavailable",
    "GLContext",
    "GLContextError",
    "GLInfo",
    "create_context",
    "llvmpipe_threads",
    "set_llvmpipe_threads",
]
