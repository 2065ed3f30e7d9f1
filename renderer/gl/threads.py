"""How many rasteriser threads llvmpipe may start in each worker process.

llvmpipe starts up to one rasteriser thread per core in every process that creates a context;
with N worker processes that is N x cores threads fighting for the cores. Give each worker
``llvmpipe_threads(N)`` threads instead, by setting ``LP_NUM_THREADS`` in the worker **before its
first context is created**: Mesa reads it when the driver creates its screen (at
``eglInitialize`` / ``OSMesaCreateContext*``), and later changes are ignored.

    # in each worker process, before renderer.gl.create_context():
    set_llvmpipe_threads(llvmpipe_threads(concurrency))

The pixels do not depend on the thread count (each tile is rasterised by one thread); the
speed does. Nothing here loads GL.
"""

from __future__ import annotations

import os

ENV = "LP_NUM_THREADS"

# Libraries whose presence in /proc/self/maps means a Mesa (or other) driver has been loaded.
_DRIVER_MARKERS = ("_dri.so", "libgallium", "libOSMesa", "libEGL_mesa", "libGLX_mesa", "libEGL_nvidia")


def available_cores() -> int:
    """CPUs this process may run on (sched_getaffinity honours taskset/cgroup cpusets)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


def llvmpipe_threads(concurrency: int, cores: int | None = None) -> int:
    """``max(1, cores // concurrency)``: llvmpipe threads per worker when `concurrency` workers
    share `cores` CPUs (default: the CPUs available to this process)."""
    if isinstance(concurrency, bool) or not isinstance(concurrency, int) or concurrency < 1:
        raise ValueError(f"concurrency must be an integer >= 1, got {concurrency!r}")
    if cores is None:
        cores = available_cores()
    return max(1, int(cores) // concurrency)


def gl_driver_loaded(maps_path: str = "/proc/self/maps") -> bool:
    """True when a GL driver is already mapped into this process (too late for LP_NUM_THREADS)."""
    try:
        with open(maps_path, encoding="utf-8", errors="replace") as f:
            return any(marker in line for line in f for marker in _DRIVER_MARKERS)
    except OSError:
        return False


def set_llvmpipe_threads(threads: int, environ=None) -> int:
    """Set ``LP_NUM_THREADS`` (in `os.environ` by default) and return it.

    Raises RuntimeError if a GL driver is already loaded in this process and the value would
    change, because llvmpipe would silently keep its old thread count. Setting the value that
    is already there is always fine.
    """
    if isinstance(threads, bool) or not isinstance(threads, int) or threads < 0:
        raise ValueError(f"LP_NUM_THREADS must be an integer >= 0, got {threads!r}")
    env = os.environ if environ is None else environ
    value = str(threads)
    if env.get(ENV) == value:
        return threads
    if environ is None and gl_driver_loaded():
        raise RuntimeError(
            f"{ENV}={value} set after a GL driver was loaded in this process (it has"
            f" {ENV}={os.environ.get(ENV)!r}); set it in each worker before create_context()"
        )
    env[ENV] = value
    return threads
