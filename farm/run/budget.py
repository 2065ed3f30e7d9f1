"""Budgets a worker process enforces while a batch runs: wall time per frame, and memory.

A hostile model can still make a frame explode (a huge count that passes every check, a
pathological pose). The batch must not take the job with it: the frame fails with a sentence that
names the budget, and the batch goes on.

- Time: `frame_deadline(seconds)` arms SIGALRM around one frame; when it fires, `FrameTimeout`
  is raised in the rendering code at the next Python instruction. Code stuck inside one C call
  (a driver) is not interrupted; the runner's hard limit (Celery's time limit, the local pool's
  batch watchdog in farm.run.local) kills such a process, and the delivery count fails the batch.
- Memory: `limit_memory(mib)` sets RLIMIT_DATA on the worker process (private writable memory:
  the heap and anonymous mappings, which is where numpy arrays live; the GL libraries' shared
  mappings do not count), so an allocation beyond it raises MemoryError inside the frame, which
  fails that frame with the budget named. The hard limit alone is not enough for memory that grows
  in small steps (a Python loop appending to a list): at the limit every small allocation of the
  interpreter fails, slowly (glibc tries a new heap each time), and the worker was seen sitting
  there at 100% CPU past the frame time limit until the runner killed it. So while a frame runs,
  `frame_deadline` also samples the process's private memory (VmData) every `MEMORY_TICK_S` and
  raises MemoryError when it passes `SOFT_MEMORY_SHARE` of RLIMIT_DATA, while the interpreter still
  has room to unwind; the frame fails with the memory budget named, and its memory is freed.

Both are read from the environment by `Budgets.from_env` (FARM_FRAME_TIME_LIMIT seconds, default
120; FARM_MEMORY_LIMIT_MB MiB per process, default 4096; 0 turns either off), in every worker
process of both runners.
"""

from __future__ import annotations

import contextlib
import functools
import resource
import signal
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass

from farm.environment import default_int, env_int

__all__ = ["Budgets", "FrameTimeout", "data_limit", "frame_deadline", "limit_memory", "over_budget", "private_memory"]

DEFAULT_FRAME_SECONDS = default_int("FARM_FRAME_TIME_LIMIT")
DEFAULT_MEMORY_MIB = default_int("FARM_MEMORY_LIMIT_MB")


class FrameTimeout(Exception):
    """A frame ran past the frame time limit (raised by the SIGALRM handler)."""


@dataclass(frozen=True)
class Budgets:
    frame_seconds: int = DEFAULT_FRAME_SECONDS  # 0: no limit
    memory_mib: int = DEFAULT_MEMORY_MIB  # 0: no limit

    @classmethod
    def from_env(cls, environ=None) -> Budgets:
        return cls(env_int("FARM_FRAME_TIME_LIMIT", environ=environ),
                   env_int("FARM_MEMORY_LIMIT_MB", environ=environ))


MEMORY_TICK_S = 0.25  # how often a running frame's memory is sampled
SOFT_MEMORY_SHARE = 0.9  # a frame fails when the process's private memory passes this share of RLIMIT_DATA


def data_limit() -> int | None:
    """This process's RLIMIT_DATA in bytes (set by `limit_memory`), None when unlimited."""
    soft = resource.getrlimit(resource.RLIMIT_DATA)[0]
    return None if soft == resource.RLIM_INFINITY else soft


def private_memory() -> int | None:
    """This process's private writable memory (VmData, what RLIMIT_DATA counts) in bytes, or None."""
    try:
        with open("/proc/self/status", "rb") as f:
            for line in f:
                if line.startswith(b"VmData:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


@functools.cache
def _memory_readable() -> bool:
    """Whether this process can read its private memory (asked once a process, not once a frame)."""
    return private_memory() is not None


def _alarm_handler(deadline: float | None, soft_bytes: int | None):
    def on_alarm(signum, frame):
        if deadline is not None and time.monotonic() >= deadline:
            raise FrameTimeout()
        used = private_memory() if soft_bytes else None
        if used is not None and used > soft_bytes:
            raise MemoryError(f"{used >> 20} MiB in use, over {SOFT_MEMORY_SHARE:.0%} of the limit")

    return on_alarm


@contextlib.contextmanager
def frame_deadline(seconds: float) -> Iterator[None]:
    """Raise FrameTimeout in this block after `seconds`, and MemoryError when the process's private
    memory passes SOFT_MEMORY_SHARE of its RLIMIT_DATA (no-op when neither applies, or off the main
    thread)."""
    cap = data_limit()
    soft_bytes = int(cap * SOFT_MEMORY_SHARE) if cap is not None and _memory_readable() else None
    if (not seconds and soft_bytes is None) or threading.current_thread() is not threading.main_thread():
        yield
        return
    deadline = time.monotonic() + float(seconds) if seconds else None
    first = MEMORY_TICK_S if soft_bytes is not None else float(seconds)
    previous = signal.signal(signal.SIGALRM, _alarm_handler(deadline, soft_bytes))
    # periodic: a tick samples the memory, and one at or after the deadline raises FrameTimeout
    signal.setitimer(signal.ITIMER_REAL, min(first, float(seconds) or first), MEMORY_TICK_S)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def limit_memory(mib: int) -> int | None:
    """Cap this process's private writable memory at `mib` MiB (RLIMIT_DATA); returns the cap in
    bytes, or None when there is none (0, or the system refuses)."""
    if not mib:
        return None
    cap = int(mib) * 1024 * 1024
    soft, hard = resource.getrlimit(resource.RLIMIT_DATA)
    if hard != resource.RLIM_INFINITY:
        cap = min(cap, hard)
    try:
        resource.setrlimit(resource.RLIMIT_DATA, (cap, hard))
    except (ValueError, OSError):
        return None
    return cap


def over_budget(e: BaseException, budgets: Budgets) -> str | None:
    """The sentence for an exception that means a budget ran out, else None."""
    if isinstance(e, FrameTimeout):
        return (f"the frame took longer than the frame time limit of {budgets.frame_seconds} s"
                f" (FARM_FRAME_TIME_LIMIT)")
    if isinstance(e, MemoryError):
        detail = f": {e}" if str(e) else ""
        return (f"the frame needed more memory than the limit of {budgets.memory_mib} MiB per worker process"
                f" (FARM_MEMORY_LIMIT_MB){detail}")
    return None
