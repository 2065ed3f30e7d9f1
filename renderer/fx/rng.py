"""Counter-based random numbers for emitters: keyed by the trace and the step, never by history.

Every emitter of every model instance has a 128-bit key

    key = int.from_bytes(sha256(text)[:16], "little"),
    text = "modelfarm.fx.v1\\0<model hash>\\0<kind>\\0<index>\\0<instance seed>"

where <model hash> is the trace's model content hash (hex), <kind> is "PRE2" or "PREM", <index> the
emitter's position in its chunk and <instance seed> the frame spec's `instance_seed`. The particles an
emitter spawns in the step ending at grid index k (t = k x STEP_MS; a last partial step to t uses
k = ceil(t / STEP_MS)) draw from `numpy.random.Generator(Philox(key=key, counter=k << 64))`, a fixed
number of uniforms per particle in spawn order. So those draws depend only on (trace, k), never on
what was drawn in earlier steps: a simulation started anywhere before t sees the same numbers.
"""

from __future__ import annotations

import hashlib

import numpy as np

SEED_RULE = "sha256(modelfarm.fx.v1|model_hash|kind|index|instance_seed)[:16] -> Philox key, counter = step << 64"


def emitter_seed(model_hash: str, kind: str, index: int, instance_seed: int) -> int:
    text = f"modelfarm.fx.v1\0{model_hash}\0{kind}\0{int(index)}\0{int(instance_seed)}"
    return int.from_bytes(hashlib.sha256(text.encode()).digest()[:16], "little")


def step_generator(key: int, step: int) -> np.random.Generator:
    """The generator of one emitter (key `emitter_seed(...)`) for the step ending at grid index `step`."""
    return np.random.Generator(np.random.Philox(key=int(key), counter=int(step) << 64))
