"""The client side of a Celery run: send a job's batches, follow their progress, collect results.

Used by farm.run.dispatch when a broker is given (`farm run --broker`, `farm thumbnails
--broker`, the nightly task).
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable

from celery.result import AsyncResult

from farm.celery.app import app
from farm.celery.tasks import render_batch_task
from farm.run.execute import BatchResult

__all__ = ["run_celery"]

log = logging.getLogger("farm.celery")


def _states(task_ids: list[str], chunk: int = 500) -> dict[str, dict]:
    """Each task's result meta ({status, result}); one MGET per `chunk` tasks on a Redis backend."""
    backend = app.backend
    out: dict[str, dict] = {}
    if hasattr(backend, "mget") and hasattr(backend, "get_key_for_task"):
        for i in range(0, len(task_ids), chunk):
            ids = task_ids[i:i + chunk]
            for task_id, raw in zip(ids, backend.mget([backend.get_key_for_task(t) for t in ids]), strict=True):
                out[task_id] = backend.decode_result(raw) if raw else {"status": "PENDING", "result": None}
        return out
    for task_id in task_ids:
        r = AsyncResult(task_id, app=app)
        out[task_id] = {"status": r.state, "result": r.result}
    return out


def run_celery(job_id: str, batches: list, store, broker: str | None, on_result: Callable, progress=None,
               poll_s: float = 0.2, timeout_s: float | None = None) -> None:
    """Send every batch to the workers and wait for all results, feeding `progress` as they run.

    A batch that fails as a task (retries exhausted, the hard time limit) fails its frames with the
    task's error. A batch whose worker died is redelivered by the broker and simply takes longer.
    """
    if broker:
        app.conf.broker_url = broker
        if not os.environ.get("FARM_RESULT_BACKEND"):
            app.conf.result_backend = broker
    out = store.location
    queue = os.environ.get("FARM_QUEUE") or app.conf.task_default_queue
    pending = {}
    for b in batches:
        r = render_batch_task.apply_async(kwargs={"job_id": job_id, "batch": b.to_dict(), "out": out}, queue=queue)
        pending[r.id] = b
    deadline = None if timeout_s is None else time.monotonic() + timeout_s
    try:
        while pending:
            metas = _states(list(pending))
            for task_id, meta in metas.items():
                b = pending[task_id]
                state = meta.get("status")
                if state == "PROGRESS" and progress is not None:
                    info = meta.get("result") or {}
                    if isinstance(info, dict) and info.get("batch") == b.id:
                        progress.update(b.id, info.get("done", 0), info.get("failed", 0))
                elif state == "SUCCESS":
                    del pending[task_id]
                    on_result(BatchResult.from_dict(meta["result"]))
                    app.backend.forget(task_id)
                elif state in ("FAILURE", "REVOKED"):
                    del pending[task_id]
                    exc = meta.get("result")
                    error = f"the batch task failed: {type(exc).__name__}: {exc}"
                    on_result(BatchResult.all_failed(b, error))
                    app.backend.forget(task_id)
            if pending:
                if deadline is not None and time.monotonic() > deadline:
                    raise TimeoutError(f"{len(pending)} batch(es) not finished after {timeout_s} s")
                time.sleep(poll_s)
    except BaseException:
        log.warning("stopped waiting; %d batch(es) are still queued or running on the workers", len(pending))
        raise
