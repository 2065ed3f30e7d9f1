"""A renderer factory for the sandbox tests (FARM_RENDERER=hostile_renderer:HostileRenderer, this
folder on PYTHONPATH): it draws like the synthetic renderer, and for a model named after an attack
it first tries that attack (HOSTILE_PORT: the port of a listening socket in the test; HOSTILE_FILE:
a file outside the store to write):

- net*.mdx: connects to 127.0.0.1:HOSTILE_PORT, then draws (a frame drawn means it could);
- write*.mdx: writes HOSTILE_FILE, then draws;
- eat*.mdx: allocates 4 GiB;
- spin*.mdx: spins on the CPU forever;
- crash*.mdx: dereferences NULL (SIGSEGV, as a C parser would);
- undo*.mdx: tries to leave the sandbox as a root exploit would (enter pid 1's mount and network
  namespaces, remount every mount writable), then writes HOSTILE_FILE and connects.
"""

from __future__ import annotations

import ctypes
import os
import socket
from pathlib import Path

from farm.run.worker import SyntheticRenderer


class HostileRenderer(SyntheticRenderer):
    def __init__(self):
        super().__init__(0.0)

    def render(self, model, spec, model_digest=None):
        name = Path(str(model.path)).name
        if name.startswith("net"):
            socket.create_connection(("127.0.0.1", int(os.environ["HOSTILE_PORT"])), timeout=5).close()
        elif name.startswith("write"):
            Path(os.environ["HOSTILE_FILE"]).write_text("written by a model\n")
        elif name.startswith("eat"):
            hog = bytearray(4 << 30)
            hog[-1] = 1
        elif name.startswith("spin"):
            while True:
                pass
        elif name.startswith("undo"):
            _undo()
            Path(os.environ["HOSTILE_FILE"]).write_text("written by a model\n")
            socket.create_connection(("127.0.0.1", int(os.environ["HOSTILE_PORT"])), timeout=5).close()
        elif name.startswith("crash"):
            ctypes.string_at(0)
        return super().render(model, spec, model_digest)



def _undo() -> None:
    """What root could do to undo a sandbox made of namespaces and read-only mounts alone."""
    libc = ctypes.CDLL(None, use_errno=True)
    for kind, flag in (("mnt", 0x00020000), ("net", 0x40000000)):
        try:
            fd = os.open(f"/proc/1/ns/{kind}", os.O_RDONLY)
        except OSError:
            continue
        libc.setns(fd, flag)
        os.close(fd)
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        point = line.split()[4].encode().decode("unicode_escape")
        libc.mount(None, point.encode(), None, ctypes.c_ulong(32 | 4096), None)  # MS_REMOUNT | MS_BIND, writable
