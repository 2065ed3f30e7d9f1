"""A renderer factory for the sandbox tests (FARM_RENDERER=hostile_renderer:HostileRenderer, this
folder on PYTHONPATH): it draws like the synthetic renderer, and for a model named after an attack
it first tries that attack (HOSTILE_PORT: the port of a listening socket in the test; HOSTILE_FILE:
a file outside the store to write):

- net*.mdx: connects to 127.0.0.1:HOSTILE_PORT, then draws (a frame drawn means it could);
- write*.mdx: writes HOSTILE_FILE, then draws;
- eat*.mdx: allocates 4 GiB;
- spin*.mdx: spins on the CPU forever;
- crash*.mdx: dereferences NULL (SIGSEGV, as a C parser would).
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
        elif name.startswith("crash"):
            ctypes.string_at(0)
        return super().render(model, spec, model_digest)

