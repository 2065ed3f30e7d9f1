"""The Celery app: its configuration from FARM_* variables, the beat schedule, the worker signals.

Start workers anywhere the package is installed (``farm.celery`` is the app; from the repository
root ``celery -A tasks`` works too):

    FARM_BROKER_URL=redis://host:6379/0 celery -A farm.celery worker --pool prefork --concurrency 2 -E

Configuration comes from the FARM_* variables (broker, result backend, queue, time limits,
visibility timeout, pool recycling, retries, deliveries, shutdown), read when this module is
imported; what each does and its default are in farm.environment.FARM_VARIABLES (`farm --help`),
the one place they are written. FARM_OUT is the store as this worker sees it (else the client's
path); FARM_RENDERER and FARM_GL_BACKEND pick the renderer (farm.run.worker). A worker started
without FARM_BROKER_URL uses Redis on this machine (`WORKER_BROKER`).

The tasks are farm.celery.tasks (a worker imports them as it starts: the app's `include`; this
module and the package do not, so the runner that sends batches, farm.run.celery, loads neither the
tasks nor the nightly they run); the runner (send a job's batches, follow them) is farm.run.celery.

GL lifecycle (farm.run.worker): nothing GL is imported here or in the worker's main process.
``worker_init`` (main process) records the pool size and refuses pools other than prefork;
``worker_process_init`` (each pool process, after the fork) sets LP_NUM_THREADS to
cores // concurrency and creates that process's one renderer and GL context;
``worker_process_shutdown`` releases it.

Timeouts, and what they trade. A worker that dies whole (SIGKILL, a lost machine) leaves its
batch unacknowledged in Redis; Redis hands it to another worker once the visibility timeout has
passed (checked every FARM_RESTORE_INTERVAL seconds). The visibility timeout must be longer than
the longest a batch may run (the hard time limit), or a running batch is handed to a second worker
too. So the defaults are short and agree: 600 s soft limit per batch (then its remaining frames
fail with that reason), hard limit 660 s, visibility 720 s: a dead worker's batch runs again within
about 12 minutes. A farm whose batches legitimately take longer (huge models, thousands of frames
per sequence) raises all three together; one that wants faster recovery lowers them (the fault
tests run with 10/15/20 s). A pool process that dies (the OOM killer, a driver crash) is noticed by
its worker at once (reject-on-worker-lost) and its batch goes back to the queue without waiting.

Billiard arms a batch's soft and hard limits only when the pool process acknowledges the job; a
process that is stopped (SIGSTOP, a frozen cgroup) or wedged before it does so would hold its batch
with no limit at all, until the visibility timeout hands the batch to another worker while the first
still holds it. So each worker also watches, every few seconds, the batches it handed to its pool
that no process has accepted: one still unaccepted after the hard time limit has its process killed
(`_watch_unaccepted`; with no process named, those not busy with an accepted batch), the batch goes
back to the queue (reject-on-worker-lost) and runs in a fresh process or elsewhere.

Redis restarts: workers reconnect on their own (broker_connection_retry, a result backend that
retries); a batch that finished while Redis was away still has its result in the store, which the
client reads when the result backend lost it; the client (`farm run --broker`) waits and reconnects
for up to FARM_BROKER_RETRY_S seconds (default 300) before it gives up with one sentence. Redis
should keep its data across a restart (AOF: see docker/compose.yaml); when it does not, the queued
batches are lost and the client notices and sends them again (farm.run.celery, "Batches the
broker lost"); `farm retry JOB --pending` does the same for a client that was not running.

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
import signal
import time
from pathlib import Path

from celery import Celery, signals

from farm.environment import check_broker, default_int, env_given, env_int, env_str, nightly_settings, variable_default
from farm.run import worker
from farm.settings import SettingError

__all__ = ["DEFAULT_QUEUE", "ENVELOPE_TASK", "NIGHTLY_QUEUE", "NIGHTLY_TASK", "RENDER_TASK", "app", "beat_schedule",
           "config_from_env"]

RENDER_TASK = "farm.render_batch"  # the task names: what messages name (farm.celery.tasks registers them)
ENVELOPE_TASK = "farm.render_envelope"  # many small batches in one task (farm.plan.envelopes)
NIGHTLY_TASK = "farm.nightly"
DEFAULT_QUEUE = variable_default("FARM_QUEUE")
NIGHTLY_QUEUE = variable_default("FARM_NIGHTLY_QUEUE")
WORKER_BROKER = "redis://127.0.0.1:6379/0"  # a worker's broker when FARM_BROKER_URL is not set


def config_from_env(environ=None) -> dict:
    """Celery settings from FARM_* variables (see the module docstring)."""
    env = os.environ if environ is None else environ
    broker = check_broker(env_given("FARM_BROKER_URL", env) or WORKER_BROKER, "FARM_BROKER_URL")
    soft = env_int("FARM_SOFT_TIME_LIMIT", environ=env)
    hard = env_int("FARM_TIME_LIMIT", soft + 60, env)  # FARM_VARIABLES: soft limit + 60
    if hard <= soft:
        raise SettingError(f"FARM_TIME_LIMIT ({hard} s) must be longer than FARM_SOFT_TIME_LIMIT ({soft} s)")
    visibility = env_int("FARM_VISIBILITY_TIMEOUT", hard + 60, env)  # FARM_VARIABLES: hard limit + 60
    restore = env_int("FARM_RESTORE_INTERVAL", environ=env) or default_int("FARM_RESTORE_INTERVAL")
    if visibility <= hard:
        raise SettingError(f"FARM_VISIBILITY_TIMEOUT ({visibility} s) must be longer than the hard time limit"
                           f" FARM_TIME_LIMIT ({hard} s), or Redis hands running batches to a second worker")
    queue = env_str("FARM_QUEUE", env)
    return {
        "broker_url": broker,
        "result_backend": env_given("FARM_RESULT_BACKEND", env) or broker,
        "broker_connection_retry_on_startup": True,
        "broker_connection_retry": True,
        "broker_connection_max_retries": None,  # a worker waits for Redis as long as it takes
        "broker_transport_options": {"visibility_timeout": visibility, "unacked_restore_interval": restore,
                                     "unacked_restore_throttle": 1},
        "result_backend_transport_options": {"visibility_timeout": visibility},
        "result_backend_always_retry": True,  # a result stored while Redis restarts is retried, not lost
        "result_backend_max_retries": 30,
        "worker_cancel_long_running_tasks_on_connection_loss": False,  # let them finish; their ack survives (AOF)
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
        "worker_max_tasks_per_child": env_int("FARM_MAX_TASKS_PER_CHILD", environ=env) or None,
        "worker_max_memory_per_child": env_int("FARM_MAX_MEMORY_PER_CHILD", environ=env) or None,
        "task_soft_time_limit": soft,
        "task_time_limit": hard,
        # Cold shutdown (SIGQUIT; SIGTERM under REMAP_SIGTERM=SIGQUIT, as in docker/compose.yaml): running
        # batches get this long, then are cancelled and requeued at once (docker/README.md, "Stopping").
        "worker_soft_shutdown_timeout": float(env_int("FARM_SOFT_SHUTDOWN_TIMEOUT", environ=env)),
        "result_expires": 7 * 24 * 3600,
        "farm_task_max_retries": env_int("FARM_TASK_MAX_RETRIES", environ=env),
        "farm_retry_backoff": env_int("FARM_RETRY_BACKOFF", environ=env),
        "farm_retry_backoff_max": env_int("FARM_RETRY_BACKOFF_MAX", environ=env),
        "farm_max_deliveries": env_int("FARM_MAX_DELIVERIES", environ=env),
    }


def _abs(path: str | None) -> str | None:
    """Paths as beat sees them, made absolute: the worker that runs the task may start elsewhere."""
    return None if path is None else str(Path(path).absolute())


def beat_schedule(environ=None) -> dict:
    """Celery's beat_schedule: one entry running the nightly task at HOUR:MINUTE, or {}."""
    s = nightly_settings(environ)
    if s is None:
        return {}
    from celery.schedules import crontab

    return {
        "farm-nightly": {
            "task": NIGHTLY_TASK,
            "schedule": crontab(hour=s["hour"], minute=s["minute"]),
            "kwargs": {"manifest": _abs(s["manifest"]), "reports": _abs(s["reports"]), "goldens": _abs(s["goldens"]),
                       "out": _abs(s["out"])},
            "options": {"queue": s["queue"], "expires": 20 * 3600},
        }
    }


def _nightly_routes(environ=None) -> dict:
    settings = nightly_settings(environ) or {}
    return {NIGHTLY_TASK: {"queue": settings.get("queue") or NIGHTLY_QUEUE}}


app = Celery("modelfarm", include=["farm.celery.tasks"])  # a worker imports the tasks as it starts
app.conf.update(config_from_env())
app.conf.beat_schedule = beat_schedule()
app.conf.task_routes = _nightly_routes()


# --- worker lifecycle (farm.run.worker does the per-process work)

_pool = {"concurrency": None}


@signals.worker_init.connect
def _on_worker_init(sender=None, **_):
    """Main worker process, before the pool forks: no GL here. Check the pool, note its size."""
    from celery.concurrency import get_implementation  # the worker's main process only
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


log = logging.getLogger("farm.celery")
WATCH_EVERY_S = 2.0  # how often a worker looks for batches no pool process accepted


def _watch_unaccepted(seen: dict, limit: float, pool=None, now: float | None = None) -> list[int]:
    """Kill the pool process of each batch handed to the pool and not accepted for over `limit`
    seconds (see the module docstring); a batch no process was even given for that long means the
    processes not busy with an accepted batch are stuck (stopped in their start-up, say): those are
    killed. `seen` keeps when each batch was first seen unaccepted. Returns the pids killed."""
    from celery.worker import state  # the worker's main process only

    now = time.monotonic() if now is None else now
    current, stuck = {}, set()
    for req in list(state.reserved_requests):
        # Celery's and billiard's private attributes (5.5-5.7 / 4.x), read with getattr: on a version
        # without them the watch finds nothing to do instead of failing in the worker's timer.
        ref = getattr(req, "_apply_result", None)
        job = ref() if ref is not None else None
        if job is None or getattr(req, "time_start", None) or getattr(job, "_accepted", False):
            continue  # not handed to the pool yet, or accepted: billiard's time limits apply
        key = id(req)
        current[key] = seen.get(key, now)
        if now - current[key] <= limit:
            continue
        proc = getattr(job, "_write_to", None) or getattr(job, "_scheduled_for", None)
        if proc is not None and proc.pid:
            stuck.add(proc.pid)
        elif pool is not None:
            busy = {getattr(j, "_worker_pid", None) for j in list(getattr(pool, "_cache", {}).values())
                    if getattr(j, "_accepted", False)}
            stuck.update(p.pid for p in list(getattr(pool, "_pool", ())) if p.pid and p.pid not in busy)
        log.warning("batch %s was handed to the pool %.0f s ago and no process accepted it (stopped or stuck):"
                    " killing pool process(es) %s, the batch goes back to the queue", req.id, now - current[key],
                    ", ".join(map(str, sorted(stuck))) or "-")
        current.pop(key)
    killed = []
    for pid in sorted(stuck):
        try:
            os.kill(pid, signal.SIGKILL)
            killed.append(pid)
        except OSError:
            pass
    seen.clear()
    seen.update(current)
    return killed


@signals.worker_ready.connect
def _on_worker_ready(sender=None, **_):
    """Main worker process: start watching for batches no pool process accepts (module docstring)."""
    timer = getattr(sender, "timer", None)
    limit = float(app.conf.task_time_limit or 0)
    if timer is None or not limit:
        return
    seen: dict = {}
    pool = getattr(getattr(sender, "pool", None), "_pool", None)  # the AsynPool behind Celery's TaskPool
    timer.call_repeatedly(WATCH_EVERY_S, _watch_unaccepted, (seen, limit, pool), priority=0)


@signals.worker_process_init.connect
def _on_worker_process_init(**_):
    """Each pool process, after the fork: LP_NUM_THREADS, then its one renderer and GL context."""
    worker.init_process(_pool["concurrency"] or app.conf.worker_concurrency or os.cpu_count() or 1)


@signals.worker_process_shutdown.connect
def _on_worker_process_shutdown(**_):
    worker.shutdown_process()
