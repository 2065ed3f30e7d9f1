"""The Celery tasks: render one batch (`render_batch_task`), run the nightly job (`nightly_task`).

Task names and keyword arguments are part of the wire format ("farm.render_batch" with job_id,
batch, out, avoid, hops; "farm.nightly" with manifest, reports, goldens, out): workers of this
version accept messages that earlier versions sent.
"""

from __future__ import annotations

import logging
import os
import time

from celery.exceptions import SoftTimeLimitExceeded
from celery.utils.time import get_exponential_backoff_interval

from farm.celery.app import NIGHTLY_TASK, RENDER_TASK, app
from farm.environment import env_given, env_int
from farm.flows import nightly
from farm.plan.batches import Batch
from farm.run import sandbox, worker
from farm.run.execute import BatchResult, TransientError, render_batch
from farm.store import open_store

__all__ = ["nightly_task", "render_batch_task", "store_for"]

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


@app.task(bind=True, name=RENDER_TASK, acks_late=True, reject_on_worker_lost=True)
def render_batch_task(self, job_id: str, batch: dict, out: str, avoid: list | None = None, hops: int = 0) -> dict:
    """Render one batch into the store; returns its result ({batch, frames})."""
    conf = self.app.conf
    host = self.request.hostname or ""
    avoid = list(avoid or [])
    if host in avoid and hops < MAX_HOPS:  # failed here before: let another worker take it
        raise self.retry(kwargs={"job_id": job_id, "batch": batch, "out": out, "avoid": avoid, "hops": hops + 1},
                         countdown=0.5, max_retries=(self.request.retries or 0) + 1)
    b = Batch.from_dict(batch)
    last = [0.0, 0.0]
    eager = bool(self.request.is_eager)  # run in-process by .apply(): no backend, no events
    events = bool(conf.worker_send_task_events) and not eager

    def on_frame(done: int, total: int, failed: int) -> None:
        now = time.monotonic()
        if eager or (done < total and now - last[0] < 0.05):  # at most 20 updates a second per batch
            return
        last[0] = now
        meta = {"done": done, "total": total, "failed": failed, "batch": b.id, "pid": os.getpid(), "hostname": host}
        try:
            self.update_state(state="PROGRESS", meta=meta)  # for `farm run` (result backend)
        except Exception as e:  # noqa: BLE001 - Redis away for a moment: progress must never fail a batch
            log.debug("progress not stored: %s", e)
            return
        if events and (done == total or now - last[1] >= 0.5):  # for Flower: a custom "task-progress" event
            last[1] = now
            try:
                self.send_event("task-progress", **meta)
            except Exception as e:  # noqa: BLE001 - monitoring must never fail a batch
                log.debug("task-progress event not sent: %s", e)

    try:
        location = store_for(out, job_id)  # a FARM_OUT without the job: retried elsewhere
        store = open_store(location)

        def render(progress) -> BatchResult:
            return render_batch(b, worker.get_renderer, store, job_id, on_frame=progress,
                                abort=(SoftTimeLimitExceeded,), max_deliveries=conf.farm_max_deliveries)

        if sandbox.untrusted():  # FARM_UNTRUSTED=1: rendered in a confined child (farm.run.sandbox)
            return sandbox.confined_batch(b, store, job_id, location, lambda p: render(p).to_dict(times=True),
                                          on_frame)
        result = render(on_frame)
    except TransientError as e:
        retries = self.request.retries or 0
        countdown = get_exponential_backoff_interval(conf.farm_retry_backoff, retries, conf.farm_retry_backoff_max,
                                                     full_jitter=True)
        log.warning("batch %s: %s; retry %d in %.1f s, preferably elsewhere", b.id, e, retries + 1, countdown)
        raise self.retry(exc=e, countdown=countdown, max_retries=conf.farm_task_max_retries,
                         kwargs={"job_id": job_id, "batch": batch, "out": out,
                                 "avoid": sorted(set(avoid) | {host}), "hops": 0}) from e
    return result.to_dict(times=True)  # render times for the coordinator (the store keeps none)


_NIGHTLY_LIMIT = env_int("FARM_NIGHTLY_TIME_LIMIT")  # the table's default (farm.environment.FARM_VARIABLES)


@app.task(name=NIGHTLY_TASK, bind=True, acks_late=False, time_limit=_NIGHTLY_LIMIT + 300,
          soft_time_limit=_NIGHTLY_LIMIT)
def nightly_task(self, manifest: str, reports: str, goldens: str | None = None, out: str | None = None) -> dict:
    """Run a manifest on the farm's workers (the app's broker) and write the night's report."""
    return nightly.run_nightly(manifest, reports=reports, goldens=goldens, out=out, broker=self.app.conf.broker_url)
