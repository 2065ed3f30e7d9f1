"""The Celery app, its configuration, the batch task, and the client side of a Celery run.

Start workers from the repository root (``tasks.py`` re-exports `app`):

    FARM_BROKER_URL=redis://host:6379/0 celery -A tasks worker --pool prefork --concurrency 2 -E

Configuration comes from the environment, read when this module is imported:

=============================  =========================================================  ============
variable                       meaning                                                    default
=============================  =========================================================  ============
FARM_BROKER_URL                broker (Redis URL)                                         redis://127.0.0.1:6379/0
FARM_RESULT_BACKEND            result backend (progress states and batch results)         the broker URL
FARM_QUEUE                     queue the batches go to and workers consume                ``farm``
FARM_SOFT_TIME_LIMIT           seconds a batch may take; then its remaining frames fail   1800
FARM_TIME_LIMIT                hard limit: the pool process is killed                     soft + 300
FARM_VISIBILITY_TIMEOUT        Redis redelivers an unacked batch after this (> hard)      max(3600, 2 x hard)
FARM_MAX_TASKS_PER_CHILD       recycle a pool process after this many batches             100
FARM_MAX_MEMORY_PER_CHILD      ... or when its resident memory exceeds this (KiB)         2097152 (2 GiB)
FARM_TASK_MAX_RETRIES          retries of a batch after a transient failure               3
FARM_RETRY_BACKOFF             first retry delay, seconds (doubles, capped, jittered)     2
FARM_RETRY_BACKOFF_MAX         longest retry delay, seconds                               60
FARM_MAX_DELIVERIES            a batch whose worker died this many times fails            3
FARM_OUT                       the store as this worker sees it (else the client's path)  -
FARM_RENDERER / FARM_GL_BACKEND  see farm.worker                                          gl / auto
=============================  =========================================================  ============

GL lifecycle (farm.worker): nothing GL is imported here or in the worker's main process.
``worker_init`` (main process) records the pool size and refuses pools other than prefork;
``worker_process_init`` (each pool process, after the fork) sets LP_NUM_THREADS to
cores // concurrency and creates that process's one renderer and GL context;
``worker_process_shutdown`` releases it.

Delivery: late acks and reject-on-worker-lost (a batch whose process dies goes back to the queue
and runs again; the store makes the second run write the same files), prefetch 1 (a busy process
holds no queued batches), a visibility timeout longer than the hard limit (Redis never hands a
running batch to a second worker), soft and hard time limits per batch. A transient failure (no GL
context in that process, the store not writable) retries with exponential backoff and asks to be
run by another worker: the retried task carries the hosts it failed on, and a worker among them
passes it on (at most twice) before running it itself.

Progress: each task stores the state ``PROGRESS`` with ``{done, total, failed, batch, pid, hostname}``
in the result backend as its frames finish (at most 20 times a second; `farm run` draws it), and
sends the same fields as a custom ``task-progress`` event (at most twice a second) that Flower
shows as the task's state and fields.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable

from celery import Celery, signals
from celery.exceptions import SoftTimeLimitExceeded
from celery.utils.time import get_exponential_backoff_interval

__all__ = ["app", "config_from_env", "nightly_task", "render_batch_task", "run_celery"]

log = logging.getLogger("farm.celery")
TASK_NAME = "farm.render_batch"
MAX_HOPS = 2  # how many times a retried batch is passed on by a worker it failed on


def _int_env(name: str, default: int, environ=None) -> int:
    env = os.environ if environ is None else environ
    raw = env.get(name, "").strip()
    if not raw:
        return default
    try:
        value = int(raw)
    except ValueError:
        raise ValueError(f"{name} must be an integer, not {raw!r}") from None
    if value < 0:
        raise ValueError(f"{name} must be >= 0, not {value}")
    return value


def config_from_env(environ=None) -> dict:
    """Celery settings from FARM_* variables (see the module docstring)."""
    env = os.environ if environ is None else environ
    broker = env.get("FARM_BROKER_URL") or "redis://127.0.0.1:6379/0"
    soft = _int_env("FARM_SOFT_TIME_LIMIT", 1800, env)
    hard = _int_env("FARM_TIME_LIMIT", soft + 300, env)
    if hard <= soft:
        raise ValueError(f"FARM_TIME_LIMIT ({hard} s) must be longer than FARM_SOFT_TIME_LIMIT ({soft} s)")
    visibility = _int_env("FARM_VISIBILITY_TIMEOUT", max(3600, 2 * hard), env)
    if visibility <= hard:
        raise ValueError(f"FARM_VISIBILITY_TIMEOUT ({visibility} s) must be longer than the hard time limit"
                         f" FARM_TIME_LIMIT ({hard} s), or Redis hands running batches to a second worker")
    queue = env.get("FARM_QUEUE") or "farm"
    return {
        "broker_url": broker,
        "result_backend": env.get("FARM_RESULT_BACKEND") or broker,
        "broker_connection_retry_on_startup": True,
        "broker_transport_options": {"visibility_timeout": visibility},
        "result_backend_transport_options": {"visibility_timeout": visibility},
        "task_default_queue": queue,
        "task_serializer": "json",
        "result_serializer": "json",
        "accept_content": ["json"],
        "task_acks_late": True,
        "task_reject_on_worker_lost": True,
        "task_acks_on_failure_or_timeout": True,
        "task_track_started": True,
        "task_send_sent_event": True,
        "worker_send_task_events": True,
        "worker_prefetch_multiplier": 1,
        "worker_pool": "prefork",
        "worker_max_tasks_per_child": _int_env("FARM_MAX_TASKS_PER_CHILD", 100, env) or None,
        "worker_max_memory_per_child": _int_env("FARM_MAX_MEMORY_PER_CHILD", 2 * 1024 * 1024, env) or None,
        "task_soft_time_limit": soft,
        "task_time_limit": hard,
        "result_expires": 7 * 24 * 3600,
        "farm_task_max_retries": _int_env("FARM_TASK_MAX_RETRIES", 3, env),
        "farm_retry_backoff": _int_env("FARM_RETRY_BACKOFF", 2, env),
        "farm_retry_backoff_max": _int_env("FARM_RETRY_BACKOFF_MAX", 60, env),
        "farm_max_deliveries": _int_env("FARM_MAX_DELIVERIES", 3, env) or 3,
    }


app = Celery("modelfarm")
app.conf.update(config_from_env())


# --- worker lifecycle (farm.worker does the per-process work)

_pool = {"concurrency": None}


@signals.worker_init.connect
def _on_worker_init(sender=None, **_):
    """Main worker process, before the pool forks: no GL here. Check the pool, note its size."""
    from celery.concurrency import get_implementation
    from celery.concurrency.prefork import TaskPool

    pool = get_implementation(getattr(sender, "pool_cls", None) or "prefork")
    if not (isinstance(pool, type) and issubclass(pool, TaskPool)):
        # SystemExit, because Celery logs and swallows ordinary exceptions raised by signal handlers.
        raise SystemExit(f"modelfarm workers need the prefork pool (one GL context per pool process), not"
                         f" {pool.__module__}.{getattr(pool, '__name__', pool)}: start them with --pool prefork")
    concurrency = getattr(sender, "concurrency", None)
    if isinstance(concurrency, int) and concurrency > 0:
        _pool["concurrency"] = concurrency


@signals.worker_before_create_process.connect
def _on_before_create_process(sender=None, **_):
    n = getattr(sender, "_processes", None)  # the pool's size, once 'auto' concurrency is resolved
    if isinstance(n, int) and n > 0:
        _pool["concurrency"] = n


@signals.worker_process_init.connect
def _on_worker_process_init(**_):
    """Each pool process, after the fork: LP_NUM_THREADS, then its one renderer and GL context."""
    from farm import worker

    worker.init_process(_pool["concurrency"] or app.conf.worker_concurrency or os.cpu_count() or 1)


@signals.worker_process_shutdown.connect
def _on_worker_process_shutdown(**_):
    from farm import worker

    worker.shutdown_process()


# --- the task


@app.task(bind=True, name=TASK_NAME, acks_late=True, reject_on_worker_lost=True)
def render_batch_task(self, job_id: str, batch: dict, out: str, avoid: list | None = None, hops: int = 0) -> dict:
    """Render one batch into the store; returns its result ({batch, frames})."""
    from farm import worker
    from farm.batches import Batch, TransientError, render_batch
    from farm.store import Store

    conf = self.app.conf
    host = self.request.hostname or ""
    avoid = list(avoid or [])
    if host in avoid and hops < MAX_HOPS:  # failed here before: let another worker take it
        raise self.retry(kwargs={"job_id": job_id, "batch": batch, "out": out, "avoid": avoid, "hops": hops + 1},
                         countdown=0.5, max_retries=(self.request.retries or 0) + 1)
    b = Batch.from_dict(batch)
    store = Store(os.environ.get("FARM_OUT") or out)
    last = [0.0, 0.0]
    eager = bool(self.request.is_eager)  # run in-process by .apply(): no backend, no events
    events = bool(conf.worker_send_task_events) and not eager

    def on_frame(done: int, total: int, failed: int) -> None:
        now = time.monotonic()
        if eager or (done < total and now - last[0] < 0.05):  # at most 20 updates a second per batch
            return
        last[0] = now
        meta = {"done": done, "total": total, "failed": failed, "batch": b.id, "pid": os.getpid(), "hostname": host}
        self.update_state(state="PROGRESS", meta=meta)  # for `farm run` (result backend)
        if events and (done == total or now - last[1] >= 0.5):  # for Flower: a custom "task-progress" event
            last[1] = now
            try:
                self.send_event("task-progress", **meta)
            except Exception as e:  # noqa: BLE001 - monitoring must never fail a batch
                log.debug("task-progress event not sent: %s", e)

    try:
        result = render_batch(b, worker.get_renderer, store, job_id, on_frame=on_frame,
                              abort=(SoftTimeLimitExceeded,), max_deliveries=conf.farm_max_deliveries)
    except TransientError as e:
        retries = self.request.retries or 0
        countdown = get_exponential_backoff_interval(conf.farm_retry_backoff, retries, conf.farm_retry_backoff_max,
                                                     full_jitter=True)
        log.warning("batch %s: %s; retry %d in %.1f s, preferably elsewhere", b.id, e, retries + 1, countdown)
        raise self.retry(exc=e, countdown=countdown, max_retries=conf.farm_task_max_retries,
                         kwargs={"job_id": job_id, "batch": batch, "out": out,
                                 "avoid": sorted(set(avoid) | {host}), "hops": 0}) from e
    return result.to_dict()


# --- the client: send a job's batches, follow them, collect results


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
    from celery.result import AsyncResult

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
    from farm.batches import BatchResult, FrameResult

    if broker:
        app.conf.broker_url = broker
        if not os.environ.get("FARM_RESULT_BACKEND"):
            app.conf.result_backend = broker
    out = str(store.root)
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
                    on_result(BatchResult(b.id, [FrameResult(k, t, "failed", error=error)
                                                 for t, k in zip(b.times, b.keys, strict=True)]))
                    app.backend.forget(task_id)
            if pending:
                if deadline is not None and time.monotonic() > deadline:
                    raise TimeoutError(f"{len(pending)} batch(es) not finished after {timeout_s} s")
                time.sleep(poll_s)
    except BaseException:
        log.warning("stopped waiting; %d batch(es) are still queued or running on the workers", len(pending))
        raise


# --- nightly runs: the task and, when FARM_NIGHTLY_MANIFEST is set, the beat schedule (farm.nightly)

from farm.nightly import register as _register_nightly  # noqa: E402

nightly_task = _register_nightly(app)
