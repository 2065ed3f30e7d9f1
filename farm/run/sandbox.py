"""Untrusted files rendered in a process that can do nothing else (FARM_UNTRUSTED=1, `farm thumbnails
--untrusted`).

The model readers, StormLib and Mesa are code parsing hostile bytes: a crash or an exploit lands
where they run. With FARM_UNTRUSTED=1 a worker (the local pool's processes and Celery's alike) never
renders in its own process: each batch is rendered in a child forked for it (`run_confined`), which
before it reads a byte:

- leaves the network: a new network namespace with no interface up (`unshare(CLONE_NEWNET)`), so a
  connect fails, to the broker, to loopback and to the world;
- sees the file system read-only but for the store's folder and a scratch folder of its own (a new
  mount namespace whose every mount is remounted read-only, `unshare(CLONE_NEWNS)`);
- gives up root: every capability dropped (effective, permitted, inheritable, ambient and the
  bounding set), securebits locked so that no later exec as uid 0 regains them, and no_new_privs
  set, so that the child cannot remount `/` writable, enter the host's namespaces again (`setns`),
  trace its parent or gain privileges through a setuid program;
- runs under caps: private memory (RLIMIT_DATA, FARM_UNTRUSTED_MEMORY_MB unless FARM_MEMORY_LIMIT_MB
  is lower), CPU seconds (RLIMIT_CPU, FARM_UNTRUSTED_CPU_S), the size of any file it writes
  (RLIMIT_FSIZE, FARM_UNTRUSTED_FILE_MB), and no core dumps.

The child sends its batch result back through a pipe as JSON (never pickle: a child that was taken
over must not run code in its parent), bounded in size and in wall time (`wall_limit`), and exits;
the worker then records it (the broker, the result backend and the progress the child cannot reach
are the worker's). A child that
dies (a signal from C code, the CPU cap's SIGXCPU, the file cap's SIGXFSZ, the kernel's OOM killer)
fails its own batch's frames with one sentence naming why; the worker and the other batches go on.
Where the kernel refuses a namespace (no root, a container without CAP_SYS_ADMIN), the batch still
renders under the caps, and the worker logs one line saying which isolation it could not have.
The store must then be a folder: a child without network cannot reach a bucket (`check_store`).
"""

from __future__ import annotations

import ctypes
import errno
import json
import logging
import os
import resource
import select
import shutil
import signal
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from farm.environment import env_int
from farm.run.execute import lost_batch
from farm.run.input_cache import default_cache_folder

__all__ = ["SandboxError", "check_store", "confine", "confined_batch", "effective_capabilities", "run_confined",
           "untrusted"]

log = logging.getLogger("farm.run.sandbox")

CLONE_NEWNS = 0x00020000
CLONE_NEWNET = 0x40000000
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC = 1, 2, 4, 8
MS_REMOUNT, MS_BIND, MS_REC, MS_PRIVATE = 32, 4096, 16384, 1 << 18
_MOUNT_FLAGS = {"ro": MS_RDONLY, "nosuid": MS_NOSUID, "nodev": MS_NODEV, "noexec": MS_NOEXEC}
_KEEP_WRITABLE = ("/proc", "/sys", "/dev")  # kernel interfaces: their writes are not files
_SAID: set[str] = set()  # the isolation lines this process logged already (one each)
MAX_RESULT = 1 << 30  # bytes of a child's answer (thumbnails carry their images); more is a failure
PR_SET_PDEATHSIG = 1
PR_CAPBSET_DROP, PR_SET_SECUREBITS, PR_SET_NO_NEW_PRIVS, PR_CAP_AMBIENT = 24, 28, 38, 47
PR_CAP_AMBIENT_CLEAR_ALL = 4
SECURE_LOCKED = 0xEF  # NOROOT, NO_SETUID_FIXUP, NO_CAP_AMBIENT_RAISE locked on; KEEP_CAPS locked off
_LINUX_CAPABILITY_VERSION_3 = 0x20080522


class SandboxError(RuntimeError):
    """A batch the sandbox could not run (one sentence)."""


def untrusted(environ=None) -> bool:
    """FARM_UNTRUSTED=1: this worker renders each batch confined (`run_confined`)."""
    return env_int("FARM_UNTRUSTED", environ=environ) == 1


def check_store(location: str) -> None:
    """The store an untrusted child writes: a folder (a child has no network to reach a bucket)."""
    if "://" in location:
        raise SandboxError(f"FARM_UNTRUSTED renders with no network, so the store must be a folder, not"
                           f" {location}: render into a folder and copy it, or run trusted workers")


def _libc():
    return ctypes.CDLL(None, use_errno=True)


def _unshare(flags: int) -> str | None:
    """None when done, else why not (the errno's words)."""
    if _libc().unshare(flags) != 0:
        return os.strerror(ctypes.get_errno())
    return None


def _mount(source: str | None, target: str, flags: int) -> int:
    libc = _libc()
    rc = libc.mount(None if source is None else source.encode(), target.encode(), None, ctypes.c_ulong(flags), None)
    return 0 if rc == 0 else ctypes.get_errno()


def _mounts() -> list[tuple[str, int]]:
    """(mount point, its per-mount flags) of this mount namespace, parents before children."""
    out = []
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        parts = line.split()
        point = parts[4].encode().decode("unicode_escape")  # \040 for a space
        flags = sum(_MOUNT_FLAGS.get(o, 0) for o in parts[5].split(","))
        out.append((point, flags))
    return sorted(out, key=lambda m: m[0].count("/") if m[0] != "/" else 0)


def _read_only_but(writable: list[str]) -> str | None:
    """Remount every mount read-only, then bind `writable` folders back writable; None when done."""
    if _mount(None, "/", MS_REC | MS_PRIVATE):  # nothing done here reaches the host's mounts
        return "mount --make-rprivate / was refused"
    left = []  # mounts the kernel would not make read-only (hidden under another mount, say)
    for point, flags in _mounts():
        if point.startswith(_KEEP_WRITABLE):
            continue
        err = _mount(None, point, MS_REMOUNT | MS_BIND | MS_RDONLY | (flags & ~MS_RDONLY))
        if err and err not in (errno.EACCES, errno.EINVAL, errno.ENOENT):
            return f"remounting {point} read-only: {os.strerror(err)}"
        if err:
            left.append(point)
    for folder in writable:
        if _mount(folder, folder, MS_BIND | MS_REC) or _mount(None, folder, MS_REMOUNT | MS_BIND):
            return f"keeping {folder} writable was refused"
    return f"{len(left)} mount(s) stay writable: {', '.join(left[:5])}" if left else None


class _CapHeader(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]


class _CapData(ctypes.Structure):
    _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32), ("inheritable", ctypes.c_uint32)]


def effective_capabilities() -> int:
    """This process's effective capability mask (/proc/self/status CapEff)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("CapEff:"):
            return int(line.split()[1], 16)
    return 0


def _drop_privileges() -> str | None:
    """Every capability gone for good and no_new_privs set; None when done, else why not. The
    bounding set and securebits need CAP_SETPCAP, so they go first; capset empties the rest."""
    libc = _libc()
    if libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        return f"no_new_privs was refused ({os.strerror(ctypes.get_errno())})"
    libc.prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0)
    if effective_capabilities():
        last = int(Path("/proc/sys/kernel/cap_last_cap").read_text())
        for cap in range(last + 1):
            libc.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0)
        libc.prctl(PR_SET_SECUREBITS, SECURE_LOCKED, 0, 0, 0)
    header, data = _CapHeader(_LINUX_CAPABILITY_VERSION_3, 0), (_CapData * 2)()
    if libc.capset(ctypes.byref(header), data) != 0:
        return f"dropping capabilities was refused ({os.strerror(ctypes.get_errno())})"
    left = effective_capabilities()
    return f"capabilities {left:#x} remain" if left else None


def _say_once(line: str) -> None:
    if line not in _SAID:
        _SAID.add(line)
        log.warning(line)


def _caps() -> dict:
    """The child's caps: memory MiB, CPU seconds, file size MiB (the settings, at their bounds)."""
    memory = env_int("FARM_UNTRUSTED_MEMORY_MB")
    own = env_int("FARM_MEMORY_LIMIT_MB")
    return {"memory": min(memory, own) if own else memory, "cpu": env_int("FARM_UNTRUSTED_CPU_S"),
            "file": env_int("FARM_UNTRUSTED_FILE_MB")}


def confine(writable: list[str], caps: dict) -> list[str]:
    """In the child, before anything untrusted: no network, a read-only file system but `writable`,
    and the caps. Returns the isolation that could not be had (each a sentence; also logged once)."""
    missing = []
    why = _unshare(CLONE_NEWNET)
    if why:
        missing.append(f"no network namespace ({why}): the renderer keeps this host's network")
    why = _unshare(CLONE_NEWNS) or _read_only_but(writable)
    if why:
        missing.append(f"no read-only view of the files ({why})")
    why = _drop_privileges()  # after the namespaces and mounts, which need them
    if why:
        missing.append(f"root's privileges kept ({why}): the renderer could undo the read-only view")
    for name, value in ((resource.RLIMIT_DATA, caps["memory"] << 20), (resource.RLIMIT_FSIZE, caps["file"] << 20),
                        (resource.RLIMIT_CORE, 0)):
        resource.setrlimit(name, (value, value))
    resource.setrlimit(resource.RLIMIT_CPU, (caps["cpu"], caps["cpu"] + 5))  # SIGXCPU first, SIGKILL 5 s on
    for line in missing:
        _say_once(f"FARM_UNTRUSTED: {line}")
    return missing


_DEATHS = {signal.SIGXCPU: "it used up its CPU time cap of {cpu} s (FARM_UNTRUSTED_CPU_S)",
           signal.SIGXFSZ: "it wrote a file past the cap of {file} MiB (FARM_UNTRUSTED_FILE_MB)",
           signal.SIGKILL: "it was killed (SIGKILL: the kernel's out-of-memory killer, or a hard time limit)"}


_OUT_OF_MEMORY = 4  # the child's exit status after a MemoryError outside the frames (they say it themselves)


def _death(status: int, caps: dict) -> str:
    if os.WIFEXITED(status) and os.WEXITSTATUS(status) == _OUT_OF_MEMORY:
        return (f"the sandboxed process rendering this batch needed more than its memory cap of {caps['memory']} MiB"
                f" (FARM_UNTRUSTED_MEMORY_MB)")
    if os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        what = _DEATHS.get(sig, f"it died of signal {sig} ({signal.Signals(sig).name})").format(**caps)
        return f"the sandboxed process rendering this batch ended: {what}"
    return f"the sandboxed process rendering this batch exited with status {os.WEXITSTATUS(status)} and no result"


def wall_limit(caps: dict) -> float:
    """Seconds of wall time a child gets (its CPU cap, twice, and a minute): one that sleeps is killed."""
    return 2.0 * caps["cpu"] + 60.0


def run_confined(fn: Callable[[Callable], dict], writable: list[str],
                 on_progress: Callable[[int, int, int], None] | None = None) -> dict:
    """`fn(progress)` (a batch's render, calling `progress(done, total, failed)` after each frame and
    returning its result as a JSON-friendly dict) in a confined child; its result, or SandboxError
    with one sentence when the child gave none. The child's progress reaches `on_progress`."""
    caps = _caps()
    scratch = tempfile.mkdtemp(prefix="farm-untrusted-")
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: confine, render, answer, leave without running the parent's cleanups
        os.close(read)
        os._exit(_child(fn, write, scratch, writable, caps))
    os.close(write)
    try:
        data, timed_out = _collect(read, pid, time.monotonic() + wall_limit(caps), on_progress)
    except BaseException:  # the worker's own time limit, a shutdown: the child goes with it
        os.kill(pid, signal.SIGKILL)
        raise
    finally:
        _, status = os.waitpid(pid, 0)
        shutil.rmtree(scratch, ignore_errors=True)  # never follows a link the child left there
    if timed_out:
        raise SandboxError(f"the sandboxed process rendering this batch took more than {wall_limit(caps):.0f} s"
                           f" of wall time and was killed")
    if data is not None and os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0:
        try:
            out = json.loads(data)
        except ValueError:
            out = None
        if isinstance(out, dict):
            return out
    raise SandboxError(_death(status, caps))


def _child(fn, write: int, scratch: str, writable: list[str], caps: dict) -> int:
    try:
        _libc().prctl(PR_SET_PDEATHSIG, signal.SIGKILL)  # the worker gone: so is this child
        os.environ["TMPDIR"] = scratch
        tempfile.tempdir = scratch
        confine([scratch, *writable], caps)
        os.environ["FARM_MEMORY_LIMIT_MB"] = str(caps["memory"])  # the cap in force: the frames' sentences name it
        with os.fdopen(write, "wb", buffering=0) as out:
            def progress(done: int, total: int, failed: int) -> None:
                out.write(b"p %d %d %d\n" % (done, total, failed))

            out.write(b"r " + json.dumps(fn(progress)).encode("utf-8") + b"\n")
        return 0
    except MemoryError:
        return _OUT_OF_MEMORY
    except BaseException:  # noqa: BLE001 - any failure: no result; the parent words it
        return 3


def _collect(read: int, pid: int, deadline: float, on_progress) -> tuple[bytes | None, bool]:
    """The child's result line (None past MAX_RESULT or without one), progress lines passed on as
    they come, and whether the child ran past `deadline` (then it is killed)."""
    pending, scan, size, result = bytearray(), 0, 0, None
    with os.fdopen(read, "rb", buffering=0) as src:
        while True:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([src], [], [], left)[0]:
                os.kill(pid, signal.SIGKILL)
                return None, True
            chunk = src.read(1 << 20)
            if not chunk:
                return result, False
            size += len(chunk)
            if size > MAX_RESULT:
                os.kill(pid, signal.SIGKILL)
                return None, False
            pending += chunk
            while (end := pending.find(b"\n", scan)) >= 0:
                line, scan = bytes(pending[:end]), 0
                del pending[:end + 1]
                if line.startswith(b"r "):
                    result = line[2:]
                elif line.startswith(b"p ") and on_progress is not None:
                    _progress(line, on_progress)
            scan = len(pending)


def _progress(line: bytes, on_progress) -> None:
    parts = line.split()
    if len(parts) == 4 and all(p.isdigit() for p in parts[1:]):
        on_progress(*(int(p) for p in parts[1:]))


def confined_batch(batch, store, job_id: str, location: str, render: Callable[[Callable], dict],
                   on_frame: Callable[[int, int, int], None] | None = None) -> dict:
    """`render(on_frame)` (render_batch's result as a dict) in a confined child writing only the
    store's folder (and the travelling inputs' cache); when the child gave no result, every frame it
    had not recorded done fails with the sentence saying why (farm.run.execute.lost_batch)."""
    cache = default_cache_folder()
    writable = [os.path.realpath(location), *([str(cache)] if cache.is_dir() else [])]
    try:
        check_store(location)
        return run_confined(render, writable, on_frame)
    except SandboxError as e:
        log.warning("batch %s: %s", batch.id, e)
        return lost_batch(batch, store, job_id, str(e)).to_dict(times=True)

