"""Why a job's frame failed, when a retry cannot help: its trace's ``cause`` in the job state.

``unloadable``: the model did not load when the job was planned (farm.plan.batches); nothing renders
its frames, `farm retry --failed` leaves them until the model loads, and the hints say to fix the
model instead (`RETRY_CANNOT_FIX`, `CAUSE_HINTS`).
"""

from __future__ import annotations

__all__ = ["CAUSE_HINTS", "RETRY_CANNOT_FIX", "UNLOADABLE"]

UNLOADABLE = "unloadable"
RETRY_CANNOT_FIX = frozenset({UNLOADABLE})
CAUSE_HINTS = {UNLOADABLE: "a retry renders the same failure: fix the model, then run the job again"}
