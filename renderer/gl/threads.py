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

import math
import os

ENV = "LP_NUM_THREADS"

# Libraries whose presence in /proc/self/maps means a Mesa (or other) driver has been loaded.
_DRIVER_MARKERS = ("_dri.so", "libgallium", "libOSMesa", "libEGL_mesa", "libGLX_mesa", "libEGL_nvidia")


def cgroup_cpu_limit(root: str = "/sys/fs/cgroup", self_cgroup: str = "/proc/self/cgroup") -> float | None:
    """The CPU quota of this process's cgroup in CPUs (``docker run --cpus 2.5``, compose ``cpus:``,
    Kubernetes CPU limits), or None when there is none or it cannot be read.

    cgroup v2: the smallest ``cpu.max`` (``QUOTA PERIOD`` or ``max PERIOD``) of the process's cgroup
    and its ancestors; cgroup v1: ``cpu.cfs_quota_us / cpu.cfs_period_us`` (quota -1: none)."""
    paths: list[str] = []
    try:
        with open(self_cgroup, encoding="utf-8") as f:
            for line in f:
                hier, _, rest = line.strip().partition(":")
                controllers, _, path = rest.partition(":")
                if hier == "0" and controllers == "":  # v2: "0::/path"
                    parts = [p for p in path.split("/") if p]
                    paths += [os.path.join(root, *parts[:i], "cpu.max") for i in range(len(parts), -1, -1)]
                elif "cpu" in controllers.split(","):  # v1: "4:cpu,cpuacct:/path"
                    mount = os.path.join(root, controllers)
                    base = mount if os.path.isdir(mount) else os.path.join(root, "cpu")
                    parts = [p for p in path.split("/") if p]
                    # the own cgroup, or (in a container) the hierarchy's root, which is the container's
                    paths += [os.path.join(base, *parts, "cpu.cfs_quota_us"), os.path.join(base, "cpu.cfs_quota_us")]
    except OSError:
        pass
    limits = [q for q in map(_quota, paths) if q is not None]
    return min(limits) if limits else None


def _read(path: str) -> str:
    with open(path, encoding="utf-8") as f:
        return f.read().strip()


def _quota(path: str) -> float | None:
    """CPUs allowed by one cgroup file (v2 cpu.max or v1 cpu.cfs_quota_us), None when unlimited/unreadable."""
    try:
        if path.endswith("cpu.max"):
            fields = _read(path).split()
            quota, period = fields[0], int(fields[1]) if len(fields) > 1 else 100000
        else:
            quota, period = _read(path), int(_read(path[: -len("quota_us")] + "period_us"))
        if quota in ("max", "-1") or period <= 0 or int(quota) <= 0:
            return None
        return int(quota) / period
    except (OSError, ValueError, IndexError):
        return None


def available_cores() -> int:
    """CPUs this process may use: the CPUs it may run on (sched_getaffinity honours taskset and
    cgroup cpusets, ``cpuset:``), capped by its cgroup CPU quota (``cpus:``) rounded up."""
    try:
        cores = max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        cores = max(1, os.cpu_count() or 1)
    limit = cgroup_cpu_limit()
    if limit is not None:
        cores = min(cores, max(1, math.ceil(limit - 1e-9)))
    return cores


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
