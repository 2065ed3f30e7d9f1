"""Running one batch: the skeleton every batch kind and every runner (local pool, Celery) shares.

`render_batch(batch, renderer_factory, store, job_id)` renders a batch with whatever renderer the
factory returns (the process's GL renderer, or a stand-in) and returns a `BatchResult`:

1. count the delivery (`store.begin_batch`; `store.end_batch` when it ends, however it ends); a
   batch whose worker process died `max_deliveries` times (deliveries that began and never ended)
   fails without rendering, so a model that kills its process never loops forever, while a batch
   redelivered for other reasons (a visibility timeout, a resend) is not failed for it;
2. read the model (its sha256 once, then the loader); a model that fails to load fails the batch's
   frames with the loader's sentence;
3. ask the batch's kind what to render (which sequence, which times): a sequence the model lacks,
   or a model that changed since it was planned, fails the frames with that reason;
4. render frame by frame; the kind keeps each frame (frames go to the store as PNG, a thumbnail is
   encoded and returned); a frame that raises fails alone; a redelivery skips the frames an earlier
   delivery recorded as done;
5. the kind records the result (frames: the store's batch result, which `farm status` merges), also
   along the way: each frame as soon as its image is stored (`Store.record_frames` merges the one
   frame in; where requests cross a network, in the background, the frames that came while a write
   was in flight together in the next: farm.store.along), so a hard time limit or a killed process
   loses no frame whose image is stored but those of the one write then in flight (issue 34 item 5:
   recorded at most once a second, a hard limit of 2 s lost half of them); the store merges results
   forward (done beats failed, per frame) and the merged result is what the batch returns.

Problems that another process or machine may not have (no GL context, the store not writable)
raise `TransientError`, for the runner to retry elsewhere. Exceptions in `abort` (a Celery soft
time limit) stop the batch: the frames done so far stay done, the rest fail with that reason.

An envelope (farm.plan.envelopes: many small batches delivered together) is run by
`render_envelope`: each batch through `render_batch` in turn, its result handed on as it ends; a
time limit stops the envelope there.

Batch kinds: "frames" (`FRAMES`, below) and those in `BATCH_KINDS` (name -> "module:attribute",
imported when first used; only names listed there run, since the name may come from a broker).

Nothing here imports GL at import time; the renderer is created by the factory in the worker.
"""

from __future__ import annotations

import importlib
import inspect
import logging
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial

from farm.environment import default_int
from farm.images import blank_reason
from farm.plan.batches import Batch, find_sequence
from farm.run.behind import KEEP_BEHIND, Behind
from farm.run.budget import Budgets, frame_deadline, over_budget
from farm.run.inputs import read_batch_model
from farm.store.base import delivery_owner
from farm.store.documents import FrameResult  # a frame of a batch result: defined once, with the store's check
from renderer.errors import error_text
from renderer.gl.base import GLContextError
from renderer.png import png_bytes

log = logging.getLogger("farm.run")

__all__ = [
    "BATCH_KINDS",
    "DEFAULT_MAX_DELIVERIES",
    "FRAMES",
    "BatchKind",
    "BatchResult",
    "FrameResult",
    "TransientError",
    "Work",
    "acquire_renderer",
    "batch_kind",
    "diag_dict",
    "record_forward",
    "render_batch",
    "render_envelope",
]

# How many times a batch may be started (deliveries) before it is failed without rendering: a
# model that kills its worker process must not loop forever (see Store.begin_batch).
DEFAULT_MAX_DELIVERIES = default_int("FARM_MAX_DELIVERIES")


class TransientError(RuntimeError):
    """A failure of this process or machine, not of the frames: retry the batch elsewhere."""


@dataclass
class BatchResult:
    batch: str
    frames: list[FrameResult]
    attempt: int = 1
    aborted: str | None = None  # why the delivery was stopped (a time limit): an envelope stops there too

    @property
    def failed(self) -> int:
        return sum(f.status != "done" for f in self.frames)

    def to_dict(self, times: bool = False) -> dict:
        """The result as the store keeps it: no time, host or process in it, so a redelivered batch
        writes the same result. `times=True` adds each frame's render time, for the coordinator."""
        return {"batch": self.batch, "frames": [f.to_dict(times) for f in self.frames]}

    @classmethod
    def from_dict(cls, d: dict) -> BatchResult:
        return cls(d["batch"], [FrameResult.from_dict(f) for f in d["frames"]])

    @classmethod
    def all_failed(cls, batch: Batch, error: str) -> BatchResult:
        """Every frame of `batch` failed with `error` (a runner's verdict on a batch it lost)."""
        return cls(batch.id, [FrameResult(k, t, "failed", error=error)
                              for t, k in zip(batch.times, batch.keys, strict=True)])


def diag_dict(d) -> dict:
    as_dict = getattr(d, "as_dict", None)
    return as_dict() if callable(as_dict) else {"message": str(d)}


def acquire_renderer(renderer_factory, abort: tuple = ()):
    """This process's renderer. A failure is transient: another process may have a GL context."""
    try:
        return renderer_factory()
    except abort:
        raise
    except Exception as e:  # no GL here: another process may have it
        raise TransientError(f"no renderer in this process: {error_text(e)}") from e


# --------------------------------------------------------------------------------------------
# Batch kinds


@dataclass
class Work:
    """What a kind decided to render for a batch: one sequence, (key, ms) pairs, facts to report."""

    sequence: int | None
    frames: list[tuple[str, int]]
    facts: dict = field(default_factory=dict)


class BatchKind:
    """The steps a kind of batch decides; the skeleton (`render_batch`) does the rest."""

    name = "frames"

    def begin(self, store, job_id: str, batch: Batch) -> int:
        """Count this delivery; returns which one this is (1 for the first)."""
        return store.begin_batch(job_id, batch.id)

    def end(self, store, job_id: str, batch: Batch) -> None:
        """Note that this delivery ended (it did not die); a store that refuses only loses the note."""
        try:
            store.end_batch(job_id, batch.id)
        except OSError:
            pass

    def deaths(self, store, job_id: str, batch: Batch) -> int:
        """How many earlier deliveries of the batch died: began and never ended, less this one and
        those whose process is still alive on this machine (stopped, or still running while the
        broker redelivered the batch). A process on another machine cannot be asked: a delivery
        there that has not ended counts (the visibility timeout, longer than the hard time limit,
        keeps a running batch from being redelivered)."""
        try:
            unfinished = list(store.unfinished(job_id, batch.id))
        except OSError:
            return 0
        here, me = delivery_owner()
        if (here, me) in unfinished:
            unfinished.remove((here, me))
        return sum(not (host == here and pid != me and _alive(pid)) for host, pid in unfinished)

    def died_too_often(self, batch: Batch, deaths: int) -> str:
        return (f"the worker process died {deaths} times rendering this batch (model {batch.model_rel});"
                f" not trying again")

    def done_before(self, store, job_id: str, batch: Batch) -> dict[str, FrameResult]:
        """Frames an earlier delivery of this batch recorded as done (a redelivery keeps them)."""
        try:
            found = store.read_batch_result(job_id, batch.id) or {}
        except (ValueError, RuntimeError):  # a damaged result: render every frame again
            found = {}
        wanted = set(batch.keys)
        return {f["key"]: FrameResult(**f) for f in found.get("frames", ())
                if f.get("status") == "done" and f.get("key") in wanted}

    def plan(self, batch: Batch, model, digest: str) -> Work:
        """Which sequence and times to render; ValueError fails every frame with its message."""
        if batch.model_digest is not None and digest != batch.model_digest:
            raise ValueError(f"{batch.model_rel}: the file changed since the job was planned (sha256"
                             f" {batch.model_digest[:12]}..., now {digest[:12]}...); plan the job again")
        if batch.provisional and batch.model_digest is None:
            raise ValueError(f"{batch.model_rel}: the model did not load when the job was planned and loads now;"
                             f" `farm retry JOB --failed` plans it again")
        seq = batch.sequence
        if isinstance(seq, int):
            if not 0 <= seq < len(model.sequences):
                raise ValueError(f"{batch.model_rel}: sequence index {seq} is out of range (the model has"
                                 f" {len(model.sequences)})")
        elif seq is not None:
            try:
                seq = find_sequence(model, seq)
            except ValueError as e:
                raise ValueError(f"{batch.model_rel}: {e}") from None
        return Work(seq, list(zip(batch.keys, batch.times, strict=True)))

    def keep(self, batch: Batch, store, model, frame, key: str, time_ms: int, work: Work) -> FrameResult:
        """Keep a rendered frame: PNG (trace in its text chunk) into the store, with a sidecar (in the
        frame's result: Store.frame_sidecar) that says whether it is blank and lists the diagnostics
        and every asset the frame used (where found, sha256) or missed (where the search looked).
        A frame with missing assets is done, with their names noted, or failed when the job's
        policy is ``missing = "fail"``."""
        data = png_bytes(frame.rgba, frame.trace)
        assets = list(getattr(frame, "assets", []) or [])
        meta = {"trace": frame.trace, "diagnostics": [diag_dict(d) for d in frame.diagnostics], "assets": assets}
        missing = missing_names(assets)
        if missing and batch.missing == "fail":
            return FrameResult(key, time_ms, "failed", missing=missing,
                               error=f"{batch.model_rel} at {time_ms} ms: {len(missing)} asset(s) not found:"
                                     f" {', '.join(missing[:5])}{' ...' if len(missing) > 5 else ''}"
                                     f" (missing = \"fail\")")
        try:
            image = store.put_image(data)  # the sidecar travels in the batch result (Store.frame_sidecar)
        except OSError as e:
            raise TransientError(f"cannot write to the store: {e}") from e
        sidecar = {"digest": image, "bytes": len(data), **meta, "blank": blank_reason(frame.rgba)}
        return FrameResult(key, time_ms, "done", digest=image, missing=missing or None, sidecar=sidecar)

    def failed(self, key: str, time_ms: int, error: str, work: Work | None) -> FrameResult:
        return FrameResult(key, time_ms, "failed", error=error)

    def record(self, store, job_id: str, result: BatchResult) -> BatchResult:
        """Make the result visible to the coordinator (and to `farm status`) through the store; returns
        the result the store holds after merging it forward (frames done before stay done)."""
        try:
            return record_forward(store, job_id, result)
        except OSError as e:
            raise TransientError(f"cannot write the batch result to the store: {e}") from e

    def keep_result(self, store, job_id: str, result: BatchResult) -> None:
        """A batch of an envelope ended where its result cannot stream to the coordinator (a Celery
        task: the envelope's results come back together): make it findable in the store, so a
        redelivered envelope skips it and a lost one does not lose it. Frames: `record` did."""

    def record_along(self, store, job_id: str, result: BatchResult) -> None:
        """Record a frame along the way, as soon as its image is stored (Store.record_frames: at once,
        or coalesced in the background where the store's requests cross a network)."""
        try:
            store.record_frames(job_id, result.to_dict())
        except OSError as e:
            raise TransientError(f"cannot write the batch result to the store: {e}") from e


def record_forward(store, job_id: str, result: BatchResult) -> BatchResult:
    """Write `result` to the store, which merges it forward (Store.write_batch_result: a frame done
    before stays done); returns what the store now holds, with this result's render times and
    attempt (never stored). An OSError passes through (each caller says what it means)."""
    merged = store.write_batch_result(job_id, result.to_dict())
    if not isinstance(merged, dict):
        return result
    times = {f.key: f.render_s for f in result.frames}
    out = BatchResult.from_dict(merged)
    for f in out.frames:
        f.render_s = times.get(f.key)
    out.attempt = result.attempt
    return out


FRAMES = BatchKind()


def missing_names(assets: list[dict]) -> list[str]:
    """The names a frame asked for and did not find, from its asset records (renderer.assets)."""
    return list(dict.fromkeys(str(a.get("asked")) for a in assets if a.get("missing")))


# Batches of other kinds, run by both runners exactly like frame batches: name -> "module:attribute"
# (a BatchKind instance). Only names listed here run (the name comes from the batch, which may come
# from a broker), imported when first used.
BATCH_KINDS: dict[str, str] = {
    "thumbnail": "farm.thumbs.work:THUMBNAIL",  # `farm thumbnails`: one model, one image
}


def lost_batch(batch: Batch, store, job_id: str, error: str) -> BatchResult:
    """Every frame of `batch` fails with `error`, except those a process that died had already
    recorded done (merged forward into the store: a stored image is never reported failed after)."""
    kind = batch_kind(batch.kind)
    failed = BatchResult(batch.id, [kind.failed(k, t, error, None) for k, t in zip(batch.keys, batch.times,
                                                                                  strict=True)])
    return kind.record(store, job_id, failed) or failed


def render_envelope(batches: list[Batch], render_one: Callable[[Batch], BatchResult], store, job_id: str,
                    on_batch: Callable[[BatchResult], None] | None = None) -> list[BatchResult]:
    """The batches of an envelope (farm.plan.envelopes) in turn, each through `render_one` (render_batch,
    or its confined form: each with its own delivery count); `on_batch(result)` as each ends. A batch
    stopped by a time limit (`BatchResult.aborted`) stops the envelope: the batches after it fail
    with that reason, not rendered (frames a delivery before recorded done stay done: `lost_batch`)."""
    results: list[BatchResult] = []
    stop: str | None = None
    for b in batches:
        result = lost_batch(b, store, job_id, f"{b.model_rel}: {stop}; not started") if stop else render_one(b)
        stop = stop or result.aborted
        results.append(result)
        if on_batch is not None:
            on_batch(result)
    return results


def batch_kind(kind: str) -> BatchKind:
    if kind == FRAMES.name:
        return FRAMES
    try:
        module, _, name = BATCH_KINDS[kind].partition(":")
    except KeyError:
        raise ValueError(f"unknown batch kind {kind!r} (known: frames, {', '.join(sorted(BATCH_KINDS))})") from None
    return getattr(importlib.import_module(module), name)


# --------------------------------------------------------------------------------------------
# The skeleton


def render_batch(batch: Batch, renderer_factory: Callable[[], object], store, job_id: str,
                 on_frame: Callable[[int, int, int], None] | None = None, abort: tuple = (),
                 max_deliveries: int = DEFAULT_MAX_DELIVERIES, budgets: Budgets | None = None) -> BatchResult:
    """Render every frame of `batch` and record the result under `job_id` (see the module docstring).

    `renderer_factory()` returns this process's renderer: an object with `render(model, spec,
    model_digest)` -> Frame (and `context=`, when it draws textures: renderer.context) and
    `forget(model)` (renderer.Renderer, or a stand-in).
    `on_frame(done, total, failed)` is called after each frame. `budgets` (default: from the
    environment, farm.run.budget) bounds each frame's wall time; a frame over a budget fails alone.
    """
    kind = batch_kind(batch.kind)
    delivery = _Delivery(batch, kind, store, job_id, kind.begin(store, job_id, batch), on_frame)
    try:
        return delivery.run(renderer_factory, abort, max_deliveries, budgets or Budgets.from_env())
    finally:  # however it ends (a result, a retry, a soft time limit): this delivery did not die
        kind.end(store, job_id, batch)


@dataclass
class _Delivery:
    """One delivery of a batch: the frames it has so far, recorded as they come and when it ends."""

    batch: Batch
    kind: BatchKind
    store: object
    job_id: str
    attempt: int
    on_frame: Callable[[int, int, int], None] | None
    frames: list[FrameResult] = field(default_factory=list)
    work: Work | None = None
    failed: int = 0  # frames of this delivery that failed so far
    along: set = field(default_factory=set)  # keys recorded along the way where they were kept (_keep)

    def finish(self, error: str | None = None) -> BatchResult:
        """The batch's result, recorded; with `error`, every frame not done yet fails with it."""
        batch, kind, frames = self.batch, self.kind, self.frames
        if error is not None:
            done = {f.key for f in frames}
            pairs = self.work.frames if self.work is not None else list(zip(batch.keys, batch.times, strict=True))
            frames.extend(kind.failed(k, t, error, self.work) for k, t in pairs if k not in done)
        result = kind.record(self.store, self.job_id, BatchResult(batch.id, frames, self.attempt)) \
            or BatchResult(batch.id, frames, self.attempt)
        if self.on_frame:
            self.on_frame(len(result.frames), len(result.frames), result.failed)
        return result

    def progress(self, failed: int, new: FrameResult | None = None) -> None:
        """After a frame: a done frame's image is stored, so it is recorded at once (merged in with
        the others: a hard kill after this never reports it failed)."""
        if new is not None and new.status == "done" and len(self.frames) < len(self.batch.keys) \
                and new.key not in self.along:
            self.kind.record_along(self.store, self.job_id, BatchResult(self.batch.id, [new], self.attempt))
        if self.on_frame:
            self.on_frame(len(self.frames), len(self.batch.keys), failed)

    def run(self, renderer_factory, abort: tuple, max_deliveries: int, budgets: Budgets) -> BatchResult:
        batch, kind, store, job_id = self.batch, self.kind, self.store, self.job_id
        deaths = kind.deaths(store, job_id, batch) if self.attempt > 1 else 0
        if deaths >= max_deliveries:
            return self.finish(kind.died_too_often(batch, deaths))
        try:
            (model, context), digest = read_batch_model(batch, store)
        except abort:
            raise
        except Exception as e:  # noqa: BLE001 - the loader's failure is these frames' failure
            budget = over_budget(e, budgets)
            return self.finish(f"{batch.model_rel}: {budget}" if budget else error_text(e))
        try:
            self.work = work = kind.plan(batch, model, digest)
        except ValueError as e:
            return self.finish(str(e))
        before = kind.done_before(store, job_id, batch) if self.attempt > 1 else {}
        renderer = acquire_renderer(renderer_factory, abort)
        try:
            return self._frames(renderer, model, context, digest, work, before, abort, budgets)
        finally:
            _forget(renderer, model)

    def _frames(self, renderer, model, context, digest, work: Work, before: dict, abort: tuple,
                budgets: Budgets) -> BatchResult:
        """Render the frames in turn; each frame's keep (encoding, storing) runs behind the render
        thread (farm.run.behind), which goes on with the next frame; results are taken in order."""
        batch = self.batch
        ahead = _ahead(renderer, batch, work, before)
        given = _context(renderer, context)
        todo = [k for k, _ in work.frames if k not in before]
        behind = Behind(KEEP_BEHIND if len(todo) > 1 else 0)
        last = todo[-1] if todo else None
        self.failed = 0
        try:
            for key, t in work.frames:
                if key in before:  # an earlier delivery rendered and recorded it
                    self._take(behind, True, renderer, model, budgets, abort)
                    self.frames.append(before[key])
                    self.progress(self.failed)
                    continue
                started = time.perf_counter()
                frame = self._guard(key, t, partial(self._render, renderer, model, digest, key, t, ahead, given,
                                                    budgets), renderer, model, budgets, abort)
                if isinstance(frame, FrameResult):  # it failed: the frames before it are taken first
                    self._take(behind, True, renderer, model, budgets, abort)
                    self._add(frame)
                    continue
                behind.put((key, t, started), self._keep, model, frame, key, t, work, key != last)
                self._take(behind, False, renderer, model, budgets, abort)
            self._take(behind, True, renderer, model, budgets, abort)
        except _Stopped as stop:  # the frames done so far stay done, those being kept too
            try:
                self._take(behind, True, renderer, model, budgets, ())
            except _Stopped:
                pass
            stopped = self.finish(f"{batch.model_rel}: batch time limit reached ({stop.kind})")
            stopped.aborted = f"batch time limit reached ({stop.kind})"
            return stopped
        finally:
            behind.close()
        return self.finish()

    def _keep(self, model, frame, key: str, t: int, work: Work, along: bool) -> FrameResult:
        """A frame's keep and, once its image is stored, its record along the way (but the last's: the
        batch's end records it), one after the other in the keep's thread: a hard kill between the
        two is as narrow as when the render thread did both (a stored frame is never reported failed)."""
        kept = self.kind.keep(self.batch, self.store, model, frame, key, t, work)
        if along and kept.status == "done":
            self.kind.record_along(self.store, self.job_id, BatchResult(self.batch.id, [kept], self.attempt))
            self.along.add(key)
        return kept

    def _render(self, renderer, model, digest, key: str, t: int, ahead: dict, given: dict, budgets: Budgets):
        with frame_deadline(budgets.frame_seconds):
            return renderer.render(model, self.batch.frame_spec(self.work.sequence, t), model_digest=digest,
                                   **ahead.get(key, {}), **given)

    def _take(self, behind: Behind, everything: bool, renderer, model, budgets: Budgets, abort: tuple) -> None:
        """The kept frames that are due (`everything`: all that are pending), in order: each result (its
        render time from the start of its render to the end of its keep), or the frame's failure."""
        while (entry := behind.due(everything)) is not None:
            key, t, started = entry.tag
            failed = self.failed
            kept = self._guard(key, t, lambda e=entry: e.result, renderer, model, budgets, abort)
            behind.pop()
            if self.failed == failed:  # kept (done, or failed by the kind's rule: missing = "fail")
                kept.render_s = round(entry.ended - started, 6)
            self._add(kept)

    def _add(self, result: FrameResult) -> None:
        self.frames.append(result)
        self.progress(self.failed, result)

    def _guard(self, key: str, t: int, step, renderer, model, budgets: Budgets, abort: tuple):
        """step() (a frame's render, or its keep's result), or the frame's failure (a FrameResult): a
        frame that raises fails alone; `abort` stops the batch (_Stopped), GL failing in this process
        and TransientError are the process's. A failure counts in `failed`."""
        try:
            return step()
        except abort as e:
            raise _Stopped(type(e).__name__) from e
        except TransientError:
            raise
        except GLContextError as e:
            raise TransientError(f"GL failed in this process: {error_text(e)}") from e
        except Exception as e:  # noqa: BLE001 - this frame fails; the batch goes on (MemoryError too)
            budget = over_budget(e, budgets)
            if budget:  # what it built may be half made: start the model afresh
                _forget(renderer, model)
            self.failed += 1
            return self.kind.failed(key, t, f"{self.batch.model_rel} at {t} ms: {budget or error_text(e)}", self.work)


class _Stopped(Exception):
    """A batch time limit (the runner's `abort` exceptions) reached while rendering or keeping a frame."""

    def __init__(self, kind: str):
        super().__init__(kind)
        self.kind = kind


def _ahead(renderer, batch: Batch, work: Work, before: dict) -> dict[str, dict]:
    """key -> {"then": the spec of the frame rendered after it}, for a renderer whose render takes
    `then` (renderer.frame.Renderer: it poses and issues the next frame while this one rasterises);
    {} for the others (stand-ins, and subclasses that override render without it)."""
    if "then" not in _render_parameters(renderer):  # none to read: one frame at a time
        return {}
    todo = [(k, t) for k, t in work.frames if k not in before]
    return {k: {"then": batch.frame_spec(work.sequence, t)} for (k, _), (_, t) in zip(todo, todo[1:], strict=False)}


def _context(renderer, context) -> dict:
    """{"context": the model's} for a renderer whose render takes it (renderer.frame.Renderer: where
    the model came from and how its inputs are found, renderer.context); {} for stand-ins that draw
    no textures. (A Renderer subclass that overrides render without it draws the context its model's
    path names, and refuses a Halo model: renderer.formats.context_of.)"""
    return {"context": context} if "context" in _render_parameters(renderer) else {}


_PARAMETERS: dict = {}  # a render function -> the names of its parameters (read once a process, not once a batch)


def _render_parameters(renderer) -> frozenset:
    """The parameter names of `renderer.render` (none when its signature cannot be read)."""
    render = renderer.render
    fn = getattr(render, "__func__", render)  # a bound method: its function, the same for every renderer of a class
    try:
        return _PARAMETERS[fn]
    except (KeyError, TypeError):  # not seen yet (or not hashable: read each time)
        pass
    try:
        names = frozenset(inspect.signature(render).parameters)
    except (TypeError, ValueError):  # no signature to read
        names = frozenset()
    try:
        _PARAMETERS[fn] = names
    except TypeError:
        pass
    return names


def _alive(pid: int) -> bool:
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:  # a zombie (killed, not yet reaped by its pool) is dead
        with open(f"/proc/{pid}/stat", "rb") as f:
            return f.read().rsplit(b")", 1)[-1].split()[0] != b"Z"
    except (OSError, IndexError):
        return True


def _forget(renderer, model) -> None:
    forget = getattr(renderer, "forget", None)
    if forget is not None:
        try:
            forget(model)
        except Exception as e:  # noqa: BLE001 - freeing must not hide the batch's outcome: said, not raised
            log.warning("freeing %s after its batch failed: %s", getattr(model, "path", model), error_text(e))
