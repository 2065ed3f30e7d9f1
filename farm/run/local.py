"""The embedded runner: the Celery batch code in a local process pool, no broker needed.

`run_local(job_id, batches, store, workers, on_result, progress)` renders batches in `workers`
processes started with the "spawn" method (fresh interpreters: nothing of the parent, and no GL
state, is inherited). Each process runs `farm.run.worker.init_process` once (LP_NUM_THREADS =
cores // workers, then one renderer with one GL context), and `farm.run.execute.render_batch` per
batch, exactly as a Celery worker process does, so both give the same bytes. The parent only
plans, collects results and draws the progress bar; it never loads GL.

A submission is an envelope (farm.plan.envelopes): one batch, or with `group` many small ones (at
most FARM_BATCH_FRAMES frames, at least PER_PROCESS envelopes per process: the pool balances them).
Children report through the pool's queue (a SimpleQueue: a report is in the pipe before the child
goes on): an envelope started, a batch's frames (at most every PROGRESS_S, for the bar) and each
batch's result as the batch ends, so a child killed mid-envelope loses no batch it finished; an
envelope's future returns the ids of the results it sent and the child's peak resident memory.
Processes are recycled on memory growth, per pool rather than per process: once a child's peak
passes ``FARM_MAX_MEMORY_PER_CHILD`` (KiB, as Celery's worker_max_memory_per_child), the batches
not started yet go to a fresh pool; a process that keeps its memory keeps running (a fresh process
costs a spawn, imports and a GL context: at one model a batch, recycling every 100 batches cost a
third of a thumbnail run). ``FARM_MAX_TASKS_PER_CHILD``, when set in the environment, also bounds a
pool by count as Celery does: a pool of n runs at most n times that many batches, and the rest go
to a fresh pool (the executor's own
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
from farm.plan.envelopes import PER_PROCESS, Envelope, envelopes
from farm.run import sandbox, worker
from farm.run.budget import Budgets
from farm.run.execute import BatchResult, TransientError, render_batch, render_envelope
from farm.store import Store, open_store

__all__ = ["default_workers", "run_local"]

log = logging.getLogger("farm.run.local")
START_METHOD = "spawn"
TRANSIENT_RETRIES = 2
RSS_KEY = "_child_maxrss_kib"  # beside a child's result: its peak resident memory, for recycling
POLL_S = 0.005  # how often the parent's listener looks for reports
PROGRESS_S = 0.05  # a child reports a batch's frames at most this often (its end comes with its result)
DRAIN_S = 30.0  # how long the parent waits for the results an ended envelope says it sent
DEAD_GRACE_S = 2.0  # how long a dead process may go unnoticed by its pool before the pool is stopped here

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


def _run_envelope(job_id: str, envelope: dict, location: str, max_deliveries: int) -> dict:
    """Each batch of the envelope in turn; each result goes to the parent through the queue as soon
    as the batch ends (a process killed later loses none of them); returns the ids of the batches
    it sent and this process's peak memory."""
    env = Envelope.from_dict(envelope)
    store = open_store(location)
    _report(("s", env.id))  # started: the parent's watchdog counts from here
    last = [0.0]

    def one(b: Batch) -> BatchResult:
        def on_frame(done: int, total: int, failed: int) -> None:
            now = time.monotonic()
            if done < total and now - last[0] >= PROGRESS_S:  # the end of a batch comes with its result
                last[0] = now
                _report(("f", env.id, b.id, done, failed))

        def render(progress) -> BatchResult:
            return render_batch(b, worker.get_renderer, store, job_id, on_frame=progress,
                                max_deliveries=max_deliveries)

        try:
            if sandbox.untrusted():
                return BatchResult.from_dict(sandbox.confined_batch(
                    b, store, job_id, location, lambda p: render(p).to_dict(times=True), on_frame))
            return render(on_frame)
        except TransientError:
            raise  # this process cannot go on (no GL, the store): the rest goes to another
        except Exception as e:  # noqa: BLE001 - a bug in the batch code: this batch fails, the envelope goes on
            return BatchResult.all_failed(b, f"{type(e).__name__}: {e}")

    results = render_envelope(env.batches, one, store, job_id,
                              on_batch=lambda r: _report(("r", env.id, r.to_dict(times=True))))
    return {"batches": [r.batch for r in results],
            RSS_KEY: resource.getrusage(resource.RUSAGE_SELF).ru_maxrss}  # KiB on Linux: the process's peak


def _report(item: tuple) -> None:
    if _queue is not None:
        _queue.put(item)


# --- in the parent


def run_local(job_id: str, batches: list[Batch], store: Store, workers: int | None,
              on_result: Callable[[BatchResult], None], progress=None, renderer: str | None = None,
              max_deliveries: int | None = None, group: bool = False) -> None:
    """Run `batches` in a pool; `group`: many to a submission (farm.plan.envelopes, at most
    FARM_BATCH_FRAMES frames each, at least PER_PROCESS a process), else one batch a submission."""
    if not batches:
        return
    _LocalRun(job_id, batches, store, on_result, progress, renderer, max_deliveries, group).run(
        max(1, min(int(workers or default_workers()), len(batches))))


class _LocalRun:
    """One run_local call: the batches not yet finished, the progress listener, the stall watchdog,
    and the pools (the whole set, then suspects of a dead process one at a time)."""

    def __init__(self, job_id: str, batches: list[Batch], store: Store, on_result, progress, renderer, max_deliveries,
                 group: bool = False):
        self.job_id, self.store, self.on_result = job_id, store, on_result
        self.progress, self.renderer, self.group = progress, renderer, group
        self.max_deliveries = max_deliveries or env_int("FARM_MAX_DELIVERIES")
        # by count only when asked (Celery's default of 100 is for Celery's workers); by memory always
        self.max_tasks = env_int("FARM_MAX_TASKS_PER_CHILD", default=None) or None
        self.max_memory_kib = env_int("FARM_MAX_MEMORY_PER_CHILD") or None
        self.recycle = False  # a child of the current pool passed max_memory_kib: the rest go to a fresh pool
        self.ctx = mp.get_context(START_METHOD)
        self.seen: dict[str, float] = {}  # envelope id -> when a worker last reported it (started, a frame, a result)
        self.results: queue_mod.SimpleQueue = queue_mod.SimpleQueue()  # batch results the listener received
        frame_s = Budgets.from_env().frame_seconds
        self.grace = env_int("FARM_STALL_GRACE_S")
        self.stall_s = frame_s * 2 + self.grace if frame_s else 0
        self.remaining: dict[str, Batch] = {b.id: b for b in batches}
        self.transient: dict[str, int] = {}
        self.isolated_runs: dict[str, int] = {}
        self.isolate: list[str] = []

    def listen(self, q, stop: threading.Event) -> None:
        """The children's reports: ("s", envelope) started, ("f", envelope, batch, done, failed) frames,
        ("r", envelope, result) a batch ended (handed to the main thread, which records it)."""
        while not stop.is_set():
            try:
                if q.empty():  # SimpleQueue.get has no timeout: look, then wait a little
                    stop.wait(POLL_S)
                    continue
                item = q.get()
            except (EOFError, OSError, ValueError):  # closed
                return
            if item is None:  # the parent's own sentinel: the pool is over
                return
            self.seen[item[1]] = time.monotonic()
            if item[0] == "r":
                self.results.put(item[2])
            elif item[0] == "f" and self.progress is not None:
                self.progress.update(item[2], item[3], item[4])

    def drain(self, wanted: set[str] = frozenset(), wait_s: float = 0.0) -> None:
        """Record the results received; with `wanted`, wait up to `wait_s` for those batches' results."""
        deadline = time.monotonic() + wait_s
        while True:
            try:
                d = self.results.get(timeout=max(0.0, deadline - time.monotonic())) \
                    if wanted & self.remaining.keys() else self.results.get_nowait()
            except queue_mod.Empty:
                return
            self.finish(BatchResult.from_dict(d))

    def finish(self, result: BatchResult) -> None:
        if self.remaining.pop(result.batch, None) is not None:  # once: a result may come twice
            self.on_result(result)

    def stalled(self, running: set[str]) -> list[str]:
        """Envelopes whose worker reported nothing for longer than a frame may take (stuck in C code,
        where the frame's own time limit cannot reach it)."""
        if not self.stall_s:
            return []
        now = time.monotonic()
        return [e for e, at in list(self.seen.items()) if e in running and now - at > self.stall_s]

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

    def envelopes(self, ids: list[str], n: int) -> list[Envelope]:
        batches = [self.remaining[i] for i in ids]
        return envelopes(batches, least=n * PER_PROCESS) if self.group else [Envelope([b]) for b in batches]

    def run_pool(self, ids: list[str], n: int) -> bool:
        """Run these batches in a pool of n; returns True when the pool broke."""
        before = self.store.deliveries_of(self.job_id, ids)
        q, stop = self.ctx.SimpleQueue(), threading.Event()  # a put is written before it returns
        listener = threading.Thread(target=self.listen, args=(q, stop), name="farm-progress", daemon=True)
        listener.start()
        executor = ProcessPoolExecutor(max_workers=n, mp_context=self.ctx, initializer=_init_child,
                                       initargs=(n, self.renderer, q))
        # A window of envelopes in flight, the next sent as one finishes: waiting on every batch of a
        # million-frame job at once cost a pass over all of them per finished batch (quadratic).
        todo, futures = iter(self.envelopes(ids, n)), {}
        broken = killed = False
        try:
            broken, killed = self.follow(executor, todo, futures, n * 4 + 4)
        except BaseException:
            killed = True
            _kill(executor)
            executor.shutdown(wait=False, cancel_futures=True)
            raise
        finally:
            _end_listener(q, stop, listener, wake=not (killed or broken))
            self.drain()  # what the listener received before the pool ended
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
        """Send the next envelopes of `todo` with a batch still remaining until `window` are in flight;
        returns the futures in flight (a pool that broke meanwhile takes no more: the next pool's)."""
        while len(pending) < window:
            envelope = next((e for e in todo if any(b.id in self.remaining for b in e.batches)), None)
            if envelope is None:
                break
            try:
                fut = executor.submit(_run_envelope, self.job_id, envelope.to_dict(), self.store.location,
                                      self.max_deliveries)
            except BrokenProcessPool:
                break
            futures[fut] = envelope
            pending.add(fut)
        return pending

    def follow(self, executor: ProcessPoolExecutor, todo, futures: dict, window: int) -> tuple[bool, bool]:
        """Send the pool's envelopes, a window at a time, and wait for them, recording results as they
        stream in; (broken, killed)."""
        broken = killed = False
        self.recycle = False
        pending = self.submit(executor, todo, futures, set(), window)
        dead_since = None
        while pending:
            done, pending = wait(pending, timeout=0.05, return_when=FIRST_COMPLETED)
            stuck = self.stalled({futures[f].id for f in pending if f.running()})
            if stuck and not done:
                self.stop_stuck(executor, stuck)
                killed = True
            dead_since = (dead_since or time.monotonic()) if not done and _died(executor) else None
            if dead_since is not None and time.monotonic() - dead_since > DEAD_GRACE_S:
                # A process died and the executor did not notice (its survivor blocked on the report
                # lock the dead one held, the pool never broke: 1 run in 3 here): end the pool here.
                log.warning("a worker process died and its pool did not end: stopping it")
                _kill(executor)
                return True, True
            sent: set[str] = set()  # batches the envelopes that ended say they sent
            for fut in done:
                if not fut.cancelled():  # a cancelled one (recycling) is still remaining: the next pool's
                    ended, lost = self.collect(fut, futures.pop(fut))
                    sent |= ended
                    broken = broken or lost
            if self.recycle:
                for fut in pending:
                    fut.cancel()  # those not started; the running ones finish in this pool
            elif not (broken or killed):
                pending = self.submit(executor, todo, futures, pending, window)
            self.drain(sent, DRAIN_S)  # on their way through the queue, when not already here
        return broken, killed

    def stop_stuck(self, executor: ProcessPoolExecutor, stuck: list[str]) -> None:
        log.warning("batch(es) of %s reported nothing for %d s (FARM_FRAME_TIME_LIMIT x 2 + %d s): stopping"
                    " their worker processes", ", ".join(stuck), self.stall_s, self.grace)
        for e in stuck:
            self.seen.pop(e, None)
        _kill(executor)

    def collect(self, fut, envelope: Envelope) -> tuple[set[str], bool]:
        """One finished envelope: (the batches it sent results for, whether the pool broke); its
        batches failed when the envelope code failed."""
        self.seen.pop(envelope.id, None)
        left = [b for b in envelope.batches if b.id in self.remaining]
        try:
            d = fut.result()
        except BrokenProcessPool:
            return set(), True
        except TransientError as e:  # the first batch without a result could not run here; the rest did not start
            self.drain({b.id for b in left}, 0.2)
            culprit = next((b for b in envelope.batches if b.id in self.remaining), None)
            if culprit is not None:
                self.transient[culprit.id] = self.transient.get(culprit.id, 0) + 1
                if self.transient[culprit.id] > TRANSIENT_RETRIES:
                    self.finish(BatchResult.all_failed(culprit, str(e)))
            return set(), False
        except Exception as e:  # noqa: BLE001 - a bug in the envelope code: its batches without a result fail
            self.drain()
            for b in left:  # what on_result raises (a full disk) is this process's own error: it ends the run
                if b.id in self.remaining:
                    self.finish(BatchResult.all_failed(b, f"{type(e).__name__}: {e}"))
            return set(), False
        rss = d.pop(RSS_KEY, 0)
        if self.max_memory_kib and rss > self.max_memory_kib and not self.recycle:
            log.info("a worker process reached %d KiB (FARM_MAX_MEMORY_PER_CHILD %d): a fresh pool for"
                     " the batches not started", rss, self.max_memory_kib)
            self.recycle = True
        return set(d.get("batches", ())), False


def _end_listener(q, stop: threading.Event, listener: threading.Thread, wake: bool) -> None:
    """Stop a pool's progress listener. `wake`: every process of the pool lived, so the queue's write
    lock is free and a sentinel wakes the listener at once; otherwise a killed process may hold that
    lock, and the parent must never take it (the put would block on it for ever), so the listener
    sees `stop` within POLL_S."""
    stop.set()
    if wake:
        q.put(None)
    listener.join(timeout=2)
    if not listener.is_alive():  # one blocked on a report a killed process left half written keeps its pipe
        q.close()


def _died(executor: ProcessPoolExecutor) -> bool:
    """Whether a process of the pool has ended (while the pool runs, only a death ends one)."""
    return any(p.exitcode is not None for p in list(getattr(executor, "_processes", {}).values()))


def _kill(executor: ProcessPoolExecutor) -> None:
    for p in list(getattr(executor, "_processes", {}).values()):
        p.kill()
