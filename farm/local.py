"""The embedded runner: the Celery batch code in a local process pool, no broker needed.

`run_local(job_id, batches, store, workers, on_result, progress)` renders batches in `workers`
processes started with the "spawn" method (fresh interpreters: nothing of the parent, and no GL
state, is inherited). Each process runs `farm.worker.init_process` once (LP_NUM_THREADS =
cores // workers, then one renderer with one GL context), and `farm.batches.render_batch` per
batch, exactly as a Celery worker process does, so both give the same bytes. The parent only
plans, collects results and draws the progress bar; it never loads GL.

Children report frame counts through a queue (for the bar) and return each batch's result.
``FARM_MAX_TASKS_PER_CHILD`` recycles a process after that many batches, as in Celery.

A child that dies (a segfault in a driver, the OOM killer) breaks the pool. The batches it may
have been running, those whose delivery count grew without a result, are then run again one at
a time in a pool of their own, so the culprit is found and innocent batches are not blamed; the
delivery count in the store fails a batch that kills its process `max_deliveries` times (see
`render_batch`), so nothing loops forever.
"""

from __future__ import annotations

import logging
import multiprocessing as mp
import os
import queue as queue_mod
import signal
import threading
from collections.abc import Callable
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool

from farm.batches import DEFAULT_MAX_DELIVERIES, Batch, BatchResult, FrameResult, TransientError, render_batch
from farm.store import Store

__all__ = ["default_workers", "run_local"]

log = logging.getLogger("farm.local")
START_METHOD = "spawn"
TRANSIENT_RETRIES = 2

_queue = None  # in a child: where frame counts go


def default_workers() -> int:
    from renderer.gl.threads import available_cores

    return available_cores()


def _env_int(name: str) -> int | None:
    v = os.environ.get(name, "").strip()
    return int(v) if v.isdigit() and int(v) > 0 else None


# --- in the child processes


def _init_child(concurrency: int, kind: str | None, q) -> None:
    global _queue
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's to handle
    _queue = q
    from farm import worker

    worker.init_process(concurrency, kind)


def _run_batch(job_id: str, batch: dict, root: str, max_deliveries: int) -> dict:
    from farm import worker

    b = Batch.from_dict(batch)

    def on_frame(done: int, total: int, failed: int) -> None:
        if _queue is not None:
            _queue.put((b.id, done, failed))

    return render_batch(b, worker.get_renderer, Store(root), job_id, on_frame=on_frame,
                        max_deliveries=max_deliveries).to_dict()


# --- in the parent


def _failed(batch: Batch, error: str) -> BatchResult:
    return BatchResult(batch.id, [FrameResult(k, t, "failed", error=error)
                                  for t, k in zip(batch.times, batch.keys, strict=True)])


def _attempts(store: Store, job_id: str, batch_id: str) -> int:
    try:
        return store.attempts_path(job_id, batch_id).read_bytes().count(b"\n")
    except FileNotFoundError:
        return 0


def run_local(job_id: str, batches: list[Batch], store: Store, workers: int | None,
              on_result: Callable[[BatchResult], None], progress=None, renderer: str | None = None,
              max_deliveries: int | None = None) -> None:
    if not batches:
        return
    workers = max(1, min(int(workers or default_workers()), len(batches)))
    max_deliveries = max_deliveries or _env_int("FARM_MAX_DELIVERIES") or DEFAULT_MAX_DELIVERIES
    ctx = mp.get_context(START_METHOD)
    q = ctx.Queue()
    stop = threading.Event()

    def listen() -> None:
        while not stop.is_set():
            try:
                batch_id, done, failed = q.get(timeout=0.1)
            except queue_mod.Empty:
                continue
            except (EOFError, OSError):
                return
            if progress is not None:
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
        on_result(result)

    def run_pool(ids: list[str], n: int) -> bool:
        """Run these batches in a pool of n; returns True when the pool broke."""
        before = {i: _attempts(store, job_id, i) for i in ids}
        executor = ProcessPoolExecutor(max_workers=n, mp_context=ctx, initializer=_init_child,
                                       initargs=(n, renderer, q),
                                       max_tasks_per_child=_env_int("FARM_MAX_TASKS_PER_CHILD"))
        futures = {executor.submit(_run_batch, job_id, remaining[i].to_dict(), str(store.root), max_deliveries): i
                   for i in ids}
        broken = False
        try:
            pending = set(futures)
            while pending:
                done, pending = wait(pending, timeout=0.5, return_when=FIRST_COMPLETED)
                for fut in done:
                    batch_id = futures[fut]
                    try:
                        finish(BatchResult.from_dict(fut.result()))
                    except BrokenProcessPool:
                        broken = True
                    except TransientError as e:
                        transient[batch_id] = transient.get(batch_id, 0) + 1
                        if transient[batch_id] > TRANSIENT_RETRIES:
                            finish(_failed(remaining[batch_id], str(e)))
                    except Exception as e:  # noqa: BLE001 - a bug in the batch code: this batch fails
                        finish(_failed(remaining[batch_id], f"{type(e).__name__}: {e}"))
        except BaseException:
            for p in list(getattr(executor, "_processes", {}).values()):
                p.kill()
            executor.shutdown(wait=False, cancel_futures=True)
            raise
        executor.shutdown(wait=True)
        if broken:
            suspects = [i for i in ids if i in remaining and _attempts(store, job_id, i) > before[i]]
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
                        finish(_failed(remaining[batch_id], "the worker process died before it could record this"
                                                            " batch (in its set-up or writing the result)"))
                    else:
                        isolate.insert(0, batch_id)
                continue
            count = len(remaining)
            broken = run_pool(list(remaining), workers)  # in the order given (longest first)
            fruitless = fruitless + 1 if broken and len(remaining) == count and not isolate else 0
            if fruitless >= 3:  # processes die before starting any batch: GL set-up, most likely
                for b in list(remaining.values()):
                    finish(_failed(b, "worker processes die before rendering (check GL with `farm render`)"))
    finally:
        stop.set()
        listener.join(timeout=2)
        q.close()
