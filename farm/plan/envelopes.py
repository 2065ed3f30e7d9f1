"""Envelopes: many batches delivered together, the unit a runner sends when batches are small.

A thumbnail is a batch of one frame (one model); sent one by one, every model paid a delivery of its
own (a pool submission, a Celery task: its message, its result, its acknowledgement). An
`Envelope` is a run of consecutive batches sent as one delivery (one local submission, one
`farm.render_envelope` task), at most `FARM_BATCH_FRAMES` frames in all (a batch of more frames
goes alone), and whose results come back together. Inside it every batch is still run by
`farm.run.execute.render_batch`: its own delivery count, its redelivery skipping the frames done, so
a killed worker loses no finished batch (the runners take each batch's result as it finishes, or
from the store) and a redelivered envelope renders only what was not done.

`Envelope.to_dict()` is the wire form: ``{"id", "batches": [Batch.to_dict(), ...]}``.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field

from farm.plan.batches import Batch, batch_frames

__all__ = ["PER_PROCESS", "Envelope", "envelopes"]

# Envelopes per worker process at least, while there are batches: a small set (72 models for 2
# processes) in one envelope a process left one process with the larger models (sorted largest
# first) and the other idle at the end; 4 a process lets the pool balance them as it goes.
PER_PROCESS = 4


@dataclass
class Envelope:
    """Batches delivered together (see the module docstring)."""

    batches: list[Batch]
    id: str = field(default="")

    def __post_init__(self):
        if not self.id:
            body = "\n".join(b.id for b in self.batches).encode()
            self.id = "e" + hashlib.sha256(body).hexdigest()[:19]

    @property
    def frames(self) -> int:
        return sum(len(b.keys) for b in self.batches)

    def to_dict(self) -> dict:
        return {"id": self.id, "batches": [b.to_dict() for b in self.batches]}

    @classmethod
    def from_dict(cls, d: dict) -> Envelope:
        made: dict = {}  # the batches' settings, made once per distinct value (thumbnails share theirs)
        return cls([Batch.from_dict(b, made) for b in d["batches"]], str(d.get("id") or ""))


def envelopes(batches: list[Batch], budget: int | None = None, least: int = 1) -> list[Envelope]:
    """`batches` in order, cut into envelopes of at most `budget` frames (default FARM_BATCH_FRAMES;
    a batch of more goes alone), as even as possible and at least `least` of them while there are
    batches (a pool of `least` processes all get work): N one-frame batches are max(ceil(N / budget),
    least) envelopes."""
    budget = max(1, int(budget or batch_frames()))
    total = sum(len(b.keys) for b in batches)
    count = max(-(-total // budget), min(int(least), len(batches)), 1)
    out: list[list[Batch]] = []
    frames = taken = 0  # frames in the current envelope, in all of them
    for b in batches:
        n = len(b.keys)
        if not out or taken >= round(len(out) * total / count) or frames + n > budget:  # its share is full
            out.append([])
            frames = 0
        out[-1].append(b)
        frames += n
        taken += n
    return [Envelope(group) for group in out]
