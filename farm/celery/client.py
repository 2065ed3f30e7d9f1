"""The client side of a Celery run: send a job's batches, follow their progress, collect results.

Used by farm.run.dispatch when a broker is given (`farm run --broker`, `farm thumbnails
--broker`, the nightly task).
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable

import redis.exceptions
from celery import states
from celery.result import AsyncResult
from kombu.exceptions import OperationalError

from farm.celery.app import app
from farm.celery.tasks import render_batch_task
from farm.run.dispatch import RunnerUnavailable
from farm.run.execute import BatchResult
from farm.settings import env_int, redact_url

__all__ = ["run_celery"]

log = logging.getLogger("farm.celery")
# What a broker or result backend that went away raises, through kombu or redis-py.
CONNECTION_ERRORS = (redis.exceptions.ConnectionError, redis.exceptions.TimeoutError, OperationalError,
                     ConnectionError, TimeoutError)
STORE_CHECK_S = 5.0  # how often batch results are also looked for in the store


class _Reconnecting:
    """Calls that survive a broker restart: retried every second or two for up to `budget_s`
    seconds, with one line when the connection is lost and one when it is back."""

    def __init__(self, broker: str | None, say: Callable[[str], None], budget_s: int):
        self.broker = redact_url(broker or app.conf.broker_url or "")
        self.say = say
        self.budget_s = budget_s
        self.lost_at: float | None = None  # when the current outage began (None: connected)
        self.reconnected = False  # an outage ended since the caller last looked (it clears this)

    def __call__(self, fn, *args, **kwargs):
        attempt = 0
        while True:
            try:
                result = fn(*args, **kwargs)
            except CONNECTION_ERRORS as e:
                now = time.monotonic()
                if self.lost_at is None:
                    self.lost_at = now
                    self.say(f"lost the connection to the broker {self.broker} ({type(e).__name__}: {e});"
                             f" reconnecting for up to {self.budget_s} s")
                if now - self.lost_at > self.budget_s:
                    raise RunnerUnavailable(f"the broker {self.broker} did not answer for {self.budget_s} s"
                                            f" (FARM_BROKER_RETRY_S); the batches sent are still queued there:"
                                            f" `farm retry JOB --pending` follows them again") from None
                attempt += 1
                time.sleep(min(2.0, 0.25 * 2 ** attempt))  # 0.5, 1, 2, 2, ... s
                continue
            if self.lost_at is not None:
                self.say(f"reconnected to the broker after {time.monotonic() - self.lost_at:.1f} s")
                self.lost_at = None
                self.reconnected = True
            return result


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

    def say(text: str) -> None:
        log.warning("%s", text)
        if progress is not None and hasattr(progress, "write"):
            progress.write(f"farm: {text}")

    call = _Reconnecting(broker, say, env_int("FARM_BROKER_RETRY_S", 300))
    pending = {}
    for b in batches:
        r = call(render_batch_task.apply_async, kwargs={"job_id": job_id, "batch": b.to_dict(), "out": out},
                 queue=queue, retry=False)
        pending[r.id] = b
    deadline = None if timeout_s is None else time.monotonic() + timeout_s
    checked = time.monotonic()
    try:
        while pending:
            metas = call(_states, list(pending))
            if time.monotonic() - checked > STORE_CHECK_S or call.reconnected:
                # A batch whose result the backend lost (Redis restarted after the worker stored it,
                # or before) still has its result in the store, written by the worker that ran it.
                checked = time.monotonic()
                for task_id, b in list(pending.items()):
                    if metas.get(task_id, {}).get("status") in states.READY_STATES:
                        continue
                    found = store.read_batch_result(job_id, b.id)
                    if found and len(found.get("frames", ())) == len(b.keys):
                        del pending[task_id]
                        metas.pop(task_id, None)
                        on_result(BatchResult.from_dict(found))
                call.reconnected = False
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
                    call(app.backend.forget, task_id)
                elif state in ("FAILURE", "REVOKED"):
                    del pending[task_id]
                    exc = meta.get("result")
                    error = f"the batch task failed: {type(exc).__name__}: {exc}"
                    on_result(BatchResult.all_failed(b, error))
                    call(app.backend.forget, task_id)
            if pending:
                if deadline is not None and time.monotonic() > deadline:
                    raise TimeoutError(f"{len(pending)} batch(es) not finished after {timeout_s} s")
                time.sleep(poll_s)
    except BaseException:
        log.warning("stopped waiting; %d batch(es) are still queued or running on the workers", len(pending))
        raise
