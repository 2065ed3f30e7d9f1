"""The embedded runner: the Celery batch code in a local process pool, no broker needed.

`run_local(job_id, batches, store, workers, on_result, progress)` renders batches in `workers`
processes started with the "spawn" method (fresh interpreters: nothing of the parent, and no GL
state, is inherited). Each process runs `farm.run.worker.init_process` once (LP_NUM_THREADS =
cores // workers, then one renderer with one GL context), and `farm.run.execute.render_batch` per
batch, exactly as a Celery worker process does, so both give the same bytes. The parent only
plans, collects results and draws the progress bar; it never loads GL.

Children report frame counts through a queue (for the bar) and return each batch's result, with
their peak resident memory. Processes are recycled on memory growth, per pool rather than per
process: once a child's peak passes ``FARM_MAX_MEMORY_PER_CHILD`` (KiB, as Celery's
worker_max_memory_per_child), the batches not started yet go to a fresh pool; a process that keeps
its memory keeps running (a fresh process costs a spawn, imports and a GL context: at one model a
batch, recycling every 100 batches cost a third of a thumbnail run). ``FARM_MAX_TASKS_PER_CHILD``,
when set in the environment, also bounds a pool by count as Celery does: a
pool of n runs at most n times that many batches, and the rest go to a fresh pool (the executor's own
max_tasks_per_child deadlocks on Python 3.11-3.13 once a process reaches it with batches still queued,
CPython gh-115634: a local run of more than 100 batches a process never ended). Each pool has
a queue of its own: a child killed (or dying) while it writes to the queue leaves the queue's write
lock held for ever, so the parent writes its wake-up sentinel only into the queue of a pool whose
processes all lived, and a later pool's children never share a lock a dead one held.

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
import resource
import signal
import threading
import time
from collections.abc import Callable
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool

from farm.environment import env_int
from farm.plan.batches import Batch
from farm.run import sandbox, worker
from farm.run.budget import Budgets
from farm.run.execute import BatchResult, TransientError, render_batch
from farm.store import Store, open_store

__all__ = ["default_workers", "run_local"]

log = logging.getLogger("farm.run.local")
START_METHOD = "spawn"
TRANSIENT_RETRIES = 2
RSS_KEY = "_child_maxrss_kib"  # beside a child's result: its peak resident memory, for recycling

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

    store = open_store(location)

    def render(progress) -> dict:
        return render_batch(b, worker.get_renderer, store, job_id, on_frame=progress,
                            max_deliveries=max_deliveries).to_dict(times=True)

    out = sandbox.confined_batch(b, store, job_id, location, render, on_frame) if sandbox.untrusted() \
        else render(on_frame)
    out[RSS_KEY] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB on Linux: the process's peak
    return out


# --- in the parent


def run_local(job_id: str, batches: list[Batch], store: Store, workers: int | None,
              on_result: Callable[[BatchResult], None], progress=None, renderer: str | None = None,
              max_deliveries: int | None = None) -> None:
    if not batches:
        return
    _LocalRun(job_id, batches, store, on_result, progress, renderer, max_deliveries).run(
        max(1, min(int(workers or default_workers()), len(batches))))


class _LocalRun:
    """One run_local call: the batches not yet finished, the progress listener, the stall watchdog,
    and the pools (the whole set, then suspects of a dead process one at a time)."""

    def __init__(self, job_id: str, batches: list[Batch], store: Store, on_result, progress, renderer, max_deliveries):
        self.job_id, self.store, self.on_result = job_id, store, on_result
        self.progress, self.renderer = progress, renderer
        self.max_deliveries = max_deliveries or env_int("FARM_MAX_DELIVERIES")
        # by count only when asked (Celery's default of 100 is for Celery's workers); by memory always
        self.max_tasks = env_int("FARM_MAX_TASKS_PER_CHILD", default=None) or None
        self.max_memory_kib = env_int("FARM_MAX_MEMORY_PER_CHILD") or None
        self.recycle = False  # a child of the current pool passed max_memory_kib: the rest go to a fresh pool
        self.ctx = mp.get_context(START_METHOD)
        self.seen: dict[str, float] = {}  # batch id -> when a worker last reported it (started, or a frame)
        frame_s = Budgets.from_env().frame_seconds
        self.grace = env_int("FARM_STALL_GRACE_S")
        self.stall_s = frame_s * 2 + self.grace if frame_s else 0
        self.remaining: dict[str, Batch] = {b.id: b for b in batches}
        self.transient: dict[str, int] = {}
        self.isolated_runs: dict[str, int] = {}
        self.isolate: list[str] = []

    def listen(self, q, stop: threading.Event) -> None:
        while not stop.is_set():
            try:
                item = q.get(timeout=0.1)
            except queue_mod.Empty:
                continue
            except (EOFError, OSError):
                return
            if item is None:  # the parent's own sentinel: the pool is over
                return
            batch_id, done, failed = item
            self.seen[batch_id] = time.monotonic()
            if self.progress is not None and done >= 0:
                self.progress.update(batch_id, done, failed)

    def finish(self, result: BatchResult) -> None:
        self.remaining.pop(result.batch, None)
        self.seen.pop(result.batch, None)
        self.on_result(result)

    def stalled(self) -> list[str]:
        """Batches whose worker reported nothing for longer than a frame may take (stuck in C code,
        where the frame's own time limit cannot reach it)."""
        if not self.stall_s:
            return []
        now = time.monotonic()
        return [b for b, at in list(self.seen.items()) if b in self.remaining and now - at > self.stall_s]

    def run(self, workers: int) -> None:
        fruitless = 0
        while self.remaining:
            if self.isolate:
                self.run_isolated(self.isolate.pop(0))
                continue
            count = len(self.remaining)
            ids = list(self.remaining)  # in the order given (longest first)
            if self.max_tasks:  # a generation of processes: fresh ones for what is left after it
                ids = ids[:self.max_tasks * workers]
            broken = self.run_pool(ids, workers)
            fruitless = fruitless + 1 if broken and len(self.remaining) == count and not self.isolate else 0
            if fruitless >= 3:  # processes die before starting any batch: GL set-up, most likely
                for b in list(self.remaining.values()):
                    self.finish(BatchResult.all_failed(b, "worker processes die before rendering (check GL with"
                                                          " `farm render`)"))

    def run_isolated(self, batch_id: str) -> None:
        """A suspect of a dead process, alone in a pool of one; failed when it killed its process
        more than max_deliveries times."""
        if batch_id not in self.remaining:
            return
        self.isolated_runs[batch_id] = self.isolated_runs.get(batch_id, 0) + 1
        if self.run_pool([batch_id], 1) and batch_id in self.remaining:
            if self.isolated_runs[batch_id] > self.max_deliveries:
                self.finish(BatchResult.all_failed(self.remaining[batch_id], "the worker process died before it"
                                                   " could record this batch (in its set-up or writing the result)"))
            else:
                self.isolate.insert(0, batch_id)

    def run_pool(self, ids: list[str], n: int) -> bool:
        """Run these batches in a pool of n; returns True when the pool broke."""
        before = self.store.deliveries_of(self.job_id, ids)
        q, stop = self.ctx.Queue(), threading.Event()
        listener = threading.Thread(target=self.listen, args=(q, stop), name="farm-progress", daemon=True)
        listener.start()
        executor = ProcessPoolExecutor(max_workers=n, mp_context=self.ctx, initializer=_init_child,
                                       initargs=(n, self.renderer, q))
        # A window of batches in flight, the next sent as one finishes: waiting on every batch of a
        # million-frame job at once cost a pass over all of them per finished batch (quadratic).
        window, todo, futures = n * 4 + 4, iter(ids), {}
        broken = killed = False
        self.recycle = False
        try:
            pending = self.submit(executor, todo, futures, set(), window)
            while pending:
                done, pending = wait(pending, timeout=0.5, return_when=FIRST_COMPLETED)
                stuck = self.stalled()
                if stuck and not done:
                    self.stop_stuck(executor, stuck)
                    killed = True
                for fut in done:
                    if not fut.cancelled():  # a cancelled one (recycling) is still remaining: the next pool's
                        broken = self.collect(fut, futures.pop(fut)) or broken
                if self.recycle:
                    for fut in pending:
                        fut.cancel()  # those not started; the running ones finish in this pool
                elif not (broken or killed):
                    pending = self.submit(executor, todo, futures, pending, window)
        except BaseException:
            killed = True
            _kill(executor)
            executor.shutdown(wait=False, cancel_futures=True)
            raise
        finally:
            _end_listener(q, stop, listener, wake=not (killed or broken))
        # Every batch has its result: the processes exit on their own while this process goes on
        # (their exit, GL teardown included, took 0.1-0.2 s of every run); the interpreter joins
        # them at exit.
        executor.shutdown(wait=False)
        if broken:
            suspects = [i for i in ids if i in self.remaining and self.store.deliveries(self.job_id, i) > before[i]]
            self.isolate.extend(s for s in suspects if s not in self.isolate)
            log.warning("a worker process died; %d batch(es) it may have been running run again one at a time",
                        len(suspects))
        return broken

    def submit(self, executor: ProcessPoolExecutor, todo, futures: dict, pending: set, window: int) -> set:
        """Send the next batches of `todo` still remaining until `window` are in flight; returns the
        futures in flight (a pool that broke meanwhile takes no more: what is left goes to the next)."""
        while len(pending) < window:
            batch_id = next((i for i in todo if i in self.remaining), None)
            if batch_id is None:
                break
            try:
                fut = executor.submit(_run_batch, self.job_id, self.remaining[batch_id].to_dict(), self.store.location,
                                      self.max_deliveries)
            except BrokenProcessPool:
                break
            futures[fut] = batch_id
            pending.add(fut)
        return pending

    def stop_stuck(self, executor: ProcessPoolExecutor, stuck: list[str]) -> None:
        log.warning("batch(es) %s reported nothing for %d s (FARM_FRAME_TIME_LIMIT x 2 + %d s): stopping"
                    " their worker processes", ", ".join(stuck), self.stall_s, self.grace)
        for b in stuck:
            self.seen.pop(b, None)
        _kill(executor)

    def collect(self, fut, batch_id: str) -> bool:
        """One finished future: its result recorded (or the batch failed); True when the pool broke."""
        result, broken = None, False
        try:
            d = fut.result()
            rss = d.pop(RSS_KEY, 0)
            if self.max_memory_kib and rss > self.max_memory_kib and not self.recycle:
                log.info("a worker process reached %d KiB (FARM_MAX_MEMORY_PER_CHILD %d): a fresh pool for"
                         " the batches not started", rss, self.max_memory_kib)
                self.recycle = True
            result = BatchResult.from_dict(d)
        except BrokenProcessPool:
            broken = True
        except TransientError as e:
            self.transient[batch_id] = self.transient.get(batch_id, 0) + 1
            if self.transient[batch_id] > TRANSIENT_RETRIES:
                result = BatchResult.all_failed(self.remaining[batch_id], str(e))
        except Exception as e:  # noqa: BLE001 - a bug in the batch code: this batch fails
            result = BatchResult.all_failed(self.remaining[batch_id], f"{type(e).__name__}: {e}")
        if result is not None:  # outside the try: what on_result raises (a full disk) is this
            self.finish(result)  # process's own error, not the batch's, and ends the run
        return broken


def _end_listener(q, stop: threading.Event, listener: threading.Thread, wake: bool) -> None:
    """Stop a pool's progress listener. `wake`: every process of the pool lived, so the queue's write
    lock is free and a sentinel wakes the listener at once; otherwise a killed process may hold that
    lock, and the parent must never take it (its feeder thread would block on it, and the interpreter
    joins that thread at exit: the process would never end), so the listener sees `stop` within 0.1 s."""
    stop.set()
    if wake:
        q.put(None)
    listener.join(timeout=2)
    q.close()
    if not wake:
        q.cancel_join_thread()


def _kill(executor: ProcessPoolExecutor) -> None:
    for p in list(getattr(executor, "_processes", {}).values()):
        p.kill()
