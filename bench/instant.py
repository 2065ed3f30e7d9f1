"""An instant renderer for the farm's own costs (bench/scale.py): ``FARM_RENDERER=instant:InstantRenderer``
with this folder on PYTHONPATH (farm.run.worker names a renderer factory as module:callable).

Every frame is the same 8x8 RGBA picture (a gradient), so a frame costs only what the farm does around it
(planning, the batch, the PNG and its store, the result, the job state). Its trace is a real one
(the model, its hash, the sequence and time), so each frame's PNG is its own file, as with the GL
renderer. ``BENCH_INSTANT_FAIL_EVERY=K`` draws a different picture for about one frame in K (by a
hash of the model and time): a run that then fails those frames against goldens approved from a
run without it.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import numpy as np

from renderer.frame import Frame, model_hash

SIZE = 8
def _picture(blue: int) -> np.ndarray:
    """A small gradient: not blank (one value everywhere would need --allow-blank to approve), so a
    bench's goldens are approved and compared as real frames are."""
    y, x = np.mgrid[0:SIZE, 0:SIZE]
    return np.stack([x * 30, y * 30, np.full_like(x, blue), np.full_like(x, 255)], axis=-1).astype(np.uint8)


_FRAME = _picture(200)
_ODD = _picture(40)


class InstantRenderer:
    VERSION = "instant-1"

    def __init__(self):
        self.fail_every = int(os.environ.get("BENCH_INSTANT_FAIL_EVERY") or 0)

    def gl_info(self) -> dict:
        return {"renderer": "instant", "version": self.VERSION}

    def render(self, model, spec, model_digest: str | None = None) -> Frame:
        seq = spec.sequence
        name = str(model.path) if model.path else str(model.name)
        trace = {"renderer_version": self.VERSION, "model": Path(name).name,
                 "model_hash": model_digest or model_hash(model),
                 "sequence": None if seq is None else str(model.sequences[seq].name), "sequence_index": seq,
                 "time_ms": int(spec.time_ms), "camera": spec.camera, "size": [SIZE, SIZE], "gl": self.gl_info()}
        odd = False
        if self.fail_every:
            h = hashlib.blake2b(f"{name}|{spec.time_ms}".encode(), digest_size=4).digest()
            odd = int.from_bytes(h, "little") % self.fail_every == 0
        return Frame(_ODD if odd else _FRAME, trace, [])

    def forget(self, model) -> None:
        pass

    def close(self) -> None:
        pass
