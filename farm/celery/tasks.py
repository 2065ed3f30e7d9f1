"""The Celery tasks: render one batch (`render_batch_task`), the batches of an envelope
(`render_envelope_task`), run the nightly job (`nightly_task`).

Task names and keyword arguments are part of the wire format ("farm.render_batch" with job_id,
batch, out, avoid, hops; "farm.render_envelope" with job_id, envelope, out, avoid, hops;
"farm.nightly" with manifest, reports, goldens, out): workers of this version accept messages that
earlier versions sent.
"""

from __future__ import annotations

import logging
import os
import time

from celery.exceptions import SoftTimeLimitExceeded
from celery.utils.time import get_exponential_backoff_interval

from farm.celery.app import ENVELOPE_TASK, NIGHTLY_TASK, RENDER_TASK, app
from farm.environment import env_given, env_int
from farm.flows import nightly
from farm.plan.batches import Batch
from farm.plan.envelopes import Envelope
from farm.run import sandbox, worker
from farm.run.execute import BatchResult, TransientError, batch_kind, render_batch, render_envelope
from farm.store import open_store

__all__ = ["nightly_task", "render_batch_task", "render_envelope_task", "store_for"]

log = logging.getLogger("farm.celery")
MAX_HOPS = 2  # how many times a retried batch is passed on by a worker it failed on
_SEEN_HERE: set[tuple[str, str]] = set()  # (this worker's FARM_OUT, job id) found to hold the job


def store_for(out: str, job_id: str, environ=None) -> str:
    """Where this worker writes a batch of `job_id` sent for the store `out`: `out`, or this worker's
    own FARM_OUT when it is set, as the same store seen at this host's path (a container's
    /data/out) - but only when that store holds the job (checked once per job and process), never
    silently another store: a FARM_OUT without the job is a TransientError naming both (the batch
    is retried, preferably on another worker)."""
    own = env_given("FARM_OUT", environ)
    if not own or own == out or (own, job_id) in _SEEN_HERE:
        return own or out
    if not open_store(own).has_job(job_id):
        raise TransientError(f"this worker's FARM_OUT ({own}) does not hold job {job_id}, which was sent for"
                             f" the store {out}: set FARM_OUT to where this host sees that store, or unset it")
    log.info("job %s: the store %s is this worker's FARM_OUT %s", job_id, out, own)
    _SEEN_HERE.add((own, job_id))
    return own


class _Reporter:
    """A task's progress for `farm run` (PROGRESS in the result backend, at most 20 updates a second)
    and for Flower (a custom "task-progress" event, at most 2 a second); never fails a batch."""

    def __init__(self, task, **ids):
        self.task, self.ids, self.last = task, ids, [0.0, 0.0]
        self.eager = bool(task.request.is_eager)  # run in-process by .apply(): no backend, no events
        self.events = bool(task.app.conf.worker_send_task_events) and not self.eager
        self.where = {"pid": os.getpid(), "hostname": task.request.hostname or ""}

    def __call__(self, done: int, total: int, failed: int, force: bool = False, **more) -> None:
        now = time.monotonic()
        if self.eager or (not force and done < total and now - self.last[0] < 0.05):
            return
        self.last[0] = now
        meta = {"done": done, "total": total, "failed": failed, **self.ids, **more, **self.where}
        try:
            self.task.update_state(state="PROGRESS", meta=meta)  # for `farm run` (result backend)
        except Exception as e:  # noqa: BLE001 - Redis away for a moment: progress must never fail a batch
            log.debug("progress not stored: %s", e)
            return
        if self.events and (done == total or now - self.last[1] >= 0.5):
            self.last[1] = now
            try:
                self.task.send_event("task-progress", **meta)
            except Exception as e:  # noqa: BLE001 - monitoring must never fail a batch
                log.debug("task-progress event not sent: %s", e)


def _hop(task, kwargs: dict) -> None:
    """A task that failed on this worker before (its `avoid` names this host): passed on to another,
    at most MAX_HOPS times."""
    host = task.request.hostname or ""
    if host in (kwargs.get("avoid") or []) and kwargs.get("hops", 0) < MAX_HOPS:
        raise task.retry(kwargs={**kwargs, "hops": kwargs.get("hops", 0) + 1}, countdown=0.5,
                         max_retries=(task.request.retries or 0) + 1)


def _retry_elsewhere(task, e: TransientError, what: str, kwargs: dict):
    """A TransientError: the task again after a backoff, preferably on another worker."""
    conf, host = task.app.conf, task.request.hostname or ""
    retries = task.request.retries or 0
    countdown = get_exponential_backoff_interval(conf.farm_retry_backoff, retries, conf.farm_retry_backoff_max,
                                                 full_jitter=True)
    log.warning("%s: %s; retry %d in %.1f s, preferably elsewhere", what, e, retries + 1, countdown)
    return task.retry(exc=e, countdown=countdown, max_retries=conf.farm_task_max_retries,
                      kwargs={**kwargs, "avoid": sorted(set(kwargs.get("avoid") or []) | {host}), "hops": 0})


def _render_one(task, b: Batch, store, job_id: str, location: str, on_frame) -> BatchResult:
    """One batch: rendered here, or in a confined child (FARM_UNTRUSTED=1: farm.run.sandbox)."""
    def render(progress) -> BatchResult:
        return render_batch(b, worker.get_renderer, store, job_id, on_frame=progress,
                            abort=(SoftTimeLimitExceeded,), max_deliveries=task.app.conf.farm_max_deliveries)

    if sandbox.untrusted():
        return BatchResult.from_dict(sandbox.confined_batch(b, store, job_id, location,
                                                            lambda p: render(p).to_dict(times=True), on_frame))
    return render(on_frame)


@app.task(bind=True, name=RENDER_TASK, acks_late=True, reject_on_worker_lost=True)
def render_batch_task(self, job_id: str, batch: dict, out: str, avoid: list | None = None, hops: int = 0) -> dict:
    """Render one batch into the store; returns its result ({batch, frames})."""
    kwargs = {"job_id": job_id, "batch": batch, "out": out, "avoid": list(avoid or []), "hops": hops}
    _hop(self, kwargs)
    b = Batch.from_dict(batch)
    try:
        location = store_for(out, job_id)  # a FARM_OUT without the job: retried elsewhere
        result = _render_one(self, b, open_store(location), job_id, location, _Reporter(self, batch=b.id))
    except TransientError as e:
        raise _retry_elsewhere(self, e, f"batch {b.id}", kwargs) from e
    return result.to_dict(times=True)  # render times for the coordinator (the store keeps none)


@app.task(bind=True, name=ENVELOPE_TASK, acks_late=True, reject_on_worker_lost=True)
def render_envelope_task(self, job_id: str, envelope: dict, out: str, avoid: list | None = None,
                         hops: int = 0) -> dict:
    """Render the batches of an envelope (farm.plan.envelopes) in turn; returns their results together
    ({envelope, results: [{batch, frames}, ...]}). Each batch ended is also kept where a redelivery
    and the coordinator find it (BatchKind.keep_result: a thumbnail's result in the store), so a worker
    lost mid-envelope loses no finished batch and its redelivery renders only the rest."""
    kwargs = {"job_id": job_id, "envelope": envelope, "out": out, "avoid": list(avoid or []), "hops": hops}
    _hop(self, kwargs)
    env = Envelope.from_dict(envelope)
    report = _Reporter(self, envelope=env.id)
    total, ended = env.frames, [0, 0]  # frames and failures of the batches ended

    def one(b: Batch) -> BatchResult:
        def on_frame(done: int, _total: int, failed: int) -> None:
            report(ended[0] + done, total, ended[1] + failed, batch=b.id)

        return _render_one(self, b, store, job_id, location, on_frame)

    def on_batch(r: BatchResult) -> None:
        batch_kind(r_kinds[r.batch]).keep_result(store, job_id, r)
        ended[0] += len(r.frames)
        ended[1] += r.failed

    r_kinds = {b.id: b.kind for b in env.batches}
    try:
        location = store_for(out, job_id)
        store = open_store(location)
        results = render_envelope(env.batches, one, store, job_id, on_batch)
    except TransientError as e:
        raise _retry_elsewhere(self, e, f"envelope {env.id}", kwargs) from e
    return {"envelope": env.id, "results": [r.to_dict(times=True) for r in results]}


_NIGHTLY_LIMIT = env_int("FARM_NIGHTLY_TIME_LIMIT")  # the table's default (farm.environment.FARM_VARIABLES)


@app.task(name=NIGHTLY_TASK, bind=True, acks_late=False, time_limit=_NIGHTLY_LIMIT + 300,
          soft_time_limit=_NIGHTLY_LIMIT)
def nightly_task(self, manifest: str, reports: str, goldens: str | None = None, out: str | None = None) -> dict:
    """Run a manifest on the farm's workers (the app's broker) and write the night's report."""
    return nightly.run_nightly(manifest, reports=reports, goldens=goldens, out=out, broker=self.app.conf.broker_url)
