"""Per-emitter random generators: seeded from the trace, never from the clock or the process.

Every emitter of every model instance draws from its own `numpy.random.Generator(PCG64(seed))` with

    seed = int.from_bytes(sha256(text)[:16], "little"),
    text = "modelfarm.fx.v1\\0<model hash>\\0<kind>\\0<index>\\0<instance seed>"

where <model hash> is the trace's model content hash (hex), <kind> is "PRE2" or "PREM", <index> the
emitter's position in its chunk and <instance seed> the frame spec's `instance_seed`. Draws happen
in a fixed order (per step, per emitter in file order, per spawned particle a fixed number of
uniforms), so the stream a particle sees depends only on the trace and its spawn step.
"""

from __future__ import annotations

import hashlib

import numpy as np

SEED_RULE = "sha256(modelfarm.fx.v1|model_hash|kind|index|instance_seed)[:16] -> PCG64"


def emitter_seed(model_hash: str, kind: str, index: int, instance_seed: int) -> int:
    text = f"modelfarm.fx.v1\0{model_hash}\0{kind}\0{int(index)}\0{int(instance_seed)}"
    return int.from_bytes(hashlib.sha256(text.encode()).digest()[:16], "little")


def generator(model_hash: str, kind: str, index: int, instance_seed: int) -> np.random.Generator:
    return np.random.Generator(np.random.PCG64(emitter_seed(model_hash, kind, index, instance_seed)))


def copy_generator(gen: np.random.Generator) -> np.random.Generator:
    """An independent generator in the same state (the original's stream is untouched)."""
    bits = np.random.PCG64()
    bits.state = gen.bit_generator.state
    return np.random.Generator(bits)
