"""The embedded runner: the Celery batch code in a local process pool, no broker needed.

`run_local(job_id, batches, store, workers, on_result, progress)` renders batches in `workers`
processes started with the "spawn" method (fresh interpreters: nothing of the parent, and no GL
state, is inherited). Each process runs `farm.run.worker.init_process` once (LP_NUM_THREADS =
cores // workers, then one renderer with one GL context), and `farm.run.execute.render_batch` per
batch, exactly as a Celery worker process does, so both give the same bytes. The parent only
plans, collects results and draws the progress bar; it never loads GL.

Children report frame counts through a queue (for the bar) and return each batch's result.
``FARM_MAX_TASKS_PER_CHILD`` recycles a process after that many batches, as in Celery.

A child that dies (a segfault in a driver, the OOM killer) breaks the pool. The batches it may
have been running, those whose delivery count grew without a result, are then run again one at
a time in a pool of their own, so the culprit is found and innocent batches are not blamed; the
delivery count in the store fails a batch that kills its process `max_deliveries` times (see
`render_batch`), so nothing loops forever. ``FARM_MAX_DELIVERIES`` sets that bound.
"""

from __future__ import annotations

import logging
import multiprocessing as mp
import queue as queue_mod
import signal
import threading
import time
from collections.abc import Callable
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool

from farm.environment import env_int
from farm.plan.batches import Batch
from farm.run import worker
from farm.run.budget import Budgets
from farm.run.execute import BatchResult, TransientError, render_batch
from farm.store import Store, open_store

__all__ = ["default_workers", "run_local"]

log = logging.getLogger("farm.run.local")
START_METHOD = "spawn"
TRANSIENT_RETRIES = 2

_queue = None  # in a child: where frame counts go


def default_workers() -> int:
    from renderer.gl.threads import available_cores  # a CPU count: no GL library is loaded

    return available_cores()


# --- in the child processes


def _init_child(concurrency: int, kind: str | None, q) -> None:
    global _queue
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's to handle
    _queue = q
    worker.init_process(concurrency, kind)


def _run_batch(job_id: str, batch: dict, location: str, max_deliveries: int) -> dict:
    b = Batch.from_dict(batch)
    if _queue is not None:
        _queue.put((b.id, -1, 0))  # started: the parent's watchdog counts from here

    def on_frame(done: int, total: int, failed: int) -> None:
        if _queue is not None:
            _queue.put((b.id, done, failed))

    return render_batch(b, worker.get_renderer, open_store(location), job_id, on_frame=on_frame,
                        max_deliveries=max_deliveries).to_dict(times=True)


# --- in the parent


def run_local(job_id: str, batches: list[Batch], store: Store, workers: int | None,
              on_result: Callable[[BatchResult], None], progress=None, renderer: str | None = None,
              max_deliveries: int | None = None) -> None:
    if not batches:
        return
    workers = max(1, min(int(workers or default_workers()), len(batches)))
    max_deliveries = max_deliveries or env_int("FARM_MAX_DELIVERIES")
    max_tasks = env_int("FARM_MAX_TASKS_PER_CHILD") or None  # FARM_VARIABLES: 100, as in Celery
    ctx = mp.get_context(START_METHOD)
    q = ctx.Queue()
    stop = threading.Event()

    seen: dict[str, float] = {}  # batch id -> when a worker last reported it (started, or a frame)
    frame_s = Budgets.from_env().frame_seconds
    grace = env_int("FARM_STALL_GRACE_S")
    stall_s = frame_s * 2 + grace if frame_s else 0

    def listen() -> None:
        while not stop.is_set():
            try:
                item = q.get(timeout=0.1)
            except queue_mod.Empty:
                continue
            except (EOFError, OSError):
                return
            if item is None:  # the parent's own sentinel: the run is over
                return
            batch_id, done, failed = item
            seen[batch_id] = time.monotonic()
            if progress is not None and done >= 0:
                progress.update(batch_id, done, failed)

    listener = threading.Thread(target=listen, name="farm-progress", daemon=True)
    listener.start()
    remaining: dict[str, Batch] = {b.id: b for b in batches}
    transient: dict[str, int] = {}
    isolated_runs: dict[str, int] = {}
    isolate: list[str] = []
    fruitless = 0

    def finish(result: BatchResult) -> None:
        remaining.pop(result.batch, None)
        seen.pop(result.batch, None)
        on_result(result)

    def stalled() -> list[str]:
        """Batches whose worker reported nothing for longer than a frame may take (stuck in C code,
        where the frame's own time limit cannot reach it)."""
        if not stall_s:
            return []
        now = time.monotonic()
        return [b for b, at in list(seen.items()) if b in remaining and now - at > stall_s]

    def run_pool(ids: list[str], n: int) -> bool:
        """Run these batches in a pool of n; returns True when the pool broke."""
        before = {i: store.deliveries(job_id, i) for i in ids}
        executor = ProcessPoolExecutor(max_workers=n, mp_context=ctx, initializer=_init_child,
                                       initargs=(n, renderer, q),
                                       max_tasks_per_child=max_tasks)
        futures = {executor.submit(_run_batch, job_id, remaining[i].to_dict(), store.location, max_deliveries): i
                   for i in ids}
        broken = False
        try:
            pending = set(futures)
            while pending:
                done, pending = wait(pending, timeout=0.5, return_when=FIRST_COMPLETED)
                stuck = stalled()
                if stuck and not done:
                    log.warning("batch(es) %s reported nothing for %d s (FARM_FRAME_TIME_LIMIT x 2 + %d s): stopping"
                                " their worker processes", ", ".join(stuck), stall_s, grace)
                    for b in stuck:
                        seen.pop(b, None)
                    for p in list(getattr(executor, "_processes", {}).values()):
                        p.kill()
                for fut in done:
                    batch_id = futures[fut]
                    result = None
                    try:
                        result = BatchResult.from_dict(fut.result())
                    except BrokenProcessPool:
                        broken = True
                    except TransientError as e:
                        transient[batch_id] = transient.get(batch_id, 0) + 1
                        if transient[batch_id] > TRANSIENT_RETRIES:
                            result = BatchResult.all_failed(remaining[batch_id], str(e))
                    except Exception as e:  # noqa: BLE001 - a bug in the batch code: this batch fails
                        result = BatchResult.all_failed(remaining[batch_id], f"{type(e).__name__}: {e}")
                    if result is not None:  # outside the try: what on_result raises (a full disk) is this
                        finish(result)      # process's own error, not the batch's, and ends the run
        except BaseException:
            for p in list(getattr(executor, "_processes", {}).values()):
                p.kill()
            executor.shutdown(wait=False, cancel_futures=True)
            raise
        # Every batch has its result: the processes exit on their own while this process goes on
        # (their exit, GL teardown included, took 0.1-0.2 s of every run); the interpreter joins
        # them at exit.
        executor.shutdown(wait=False)
        if broken:
            suspects = [i for i in ids if i in remaining and store.deliveries(job_id, i) > before[i]]
            isolate.extend(s for s in suspects if s not in isolate)
            log.warning("a worker process died; %d batch(es) it may have been running run again one at a time",
                        len(suspects))
        return broken

    try:
        while remaining:
            if isolate:
                batch_id = isolate.pop(0)
                if batch_id not in remaining:
                    continue
                isolated_runs[batch_id] = isolated_runs.get(batch_id, 0) + 1
                if run_pool([batch_id], 1) and batch_id in remaining:
                    if isolated_runs[batch_id] > max_deliveries:
                        finish(BatchResult.all_failed(remaining[batch_id], "the worker process died before it could"
                                                      " record this batch (in its set-up or writing the result)"))
                    else:
                        isolate.insert(0, batch_id)
                continue
            count = len(remaining)
            broken = run_pool(list(remaining), workers)  # in the order given (longest first)
            fruitless = fruitless + 1 if broken and len(remaining) == count and not isolate else 0
            if fruitless >= 3:  # processes die before starting any batch: GL set-up, most likely
                for b in list(remaining.values()):
                    finish(BatchResult.all_failed(b, "worker processes die before rendering (check GL with"
                                                     " `farm render`)"))
    finally:
        stop.set()
        q.put(None)
        listener.join(timeout=2)
        q.close()
