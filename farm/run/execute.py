"""Running one batch: the skeleton every batch kind and every runner (local pool, Celery) shares.

`render_batch(batch, renderer_factory, store, job_id)` renders a batch with whatever renderer the
factory returns (the process's GL renderer, or a stand-in) and returns a `BatchResult`:

1. count the delivery (`store.begin_batch`); a batch whose worker died `max_deliveries` times fails
   without rendering, so a model that kills its process never loops forever;
2. read the model (its sha256 once, then the loader); a model that fails to load fails the batch's
   frames with the loader's sentence;
3. ask the batch's kind what to render (which sequence, which times): a sequence the model lacks,
   or a model that changed since it was planned, fails the frames with that reason;
4. render frame by frame; the kind keeps each frame (frames go to the store as PNG, a thumbnail is
   encoded and returned); a frame that raises fails alone;
5. the kind records the result (frames: the store's batch result, which `farm status` merges).

Problems that another process or machine may not have (no GL context, the store not writable)
raise `TransientError`, for the runner to retry elsewhere. Exceptions in `abort` (a Celery soft
time limit) stop the batch: the frames done so far stay done, the rest fail with that reason.

Batch kinds: "frames" (`FRAMES`, below) and those in `BATCH_KINDS` (name -> "module:attribute",
imported when first used; only names listed there run, since the name may come from a broker).

Nothing here imports GL at import time; the renderer is created by the factory in the worker.
"""

from __future__ import annotations

import importlib
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from farm.plan.batches import Batch, error_text, find_sequence, read_model_and_digest
from farm.run.budget import Budgets, frame_deadline, over_budget
from renderer.gl.base import GLContextError
from renderer.png import png_bytes

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
    "error_text",
    "render_batch",
]

# How many times a batch may be started (deliveries) before it is failed without rendering: a
# model that kills its worker process must not loop forever (see Store.begin_batch).
DEFAULT_MAX_DELIVERIES = 3


class TransientError(RuntimeError):
    """A failure of this process or machine, not of the frames: retry the batch elsewhere."""


@dataclass
class FrameResult:
    key: str
    time_ms: int
    status: str  # "done" | "failed"
    digest: str | None = None
    error: str | None = None
    info: dict | None = None  # what a batch of another kind reports about the frame (JSON-ready)
    missing: list[str] | None = None  # assets the frame asked for and the search did not find
    render_s: float | None = None  # seconds the renderer took (reported to the coordinator, never stored)

    def to_dict(self, times: bool = False) -> dict:
        return {"key": self.key, "time_ms": self.time_ms, "status": self.status, "digest": self.digest,
                "error": self.error, **({"info": self.info} if self.info is not None else {}),
                **({"missing": list(self.missing)} if self.missing else {}),
                **({"render_s": self.render_s} if times and self.render_s is not None else {})}


@dataclass
class BatchResult:
    batch: str
    frames: list[FrameResult]
    attempt: int = 1

    @property
    def failed(self) -> int:
        return sum(f.status != "done" for f in self.frames)

    def to_dict(self, times: bool = False) -> dict:
        """The result as the store keeps it: no time, host or process in it, so a redelivered batch
        writes the same result. `times=True` adds each frame's render time, for the coordinator."""
        return {"batch": self.batch, "frames": [f.to_dict(times) for f in self.frames]}

    @classmethod
    def from_dict(cls, d: dict) -> BatchResult:
        return cls(d["batch"], [FrameResult(**f) for f in d["frames"]])

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

    def died_too_often(self, batch: Batch, attempt: int) -> str:
        return (f"the worker process died {attempt - 1} times rendering this batch (model {batch.model_rel});"
                f" not trying again")

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
        """Keep a rendered frame: PNG (trace in its text chunk) into the store, with a sidecar that
        lists the diagnostics and every asset the frame used (where found, sha256) or missed (where
        the search looked). A frame with missing assets is done, with their names noted, or failed
        when the job's policy is ``missing = "fail"``."""
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
            image = store.put_image(data, meta)
        except OSError as e:
            raise TransientError(f"cannot write to the store: {e}") from e
        return FrameResult(key, time_ms, "done", digest=image, missing=missing or None)

    def failed(self, key: str, time_ms: int, error: str, work: Work | None) -> FrameResult:
        return FrameResult(key, time_ms, "failed", error=error)

    def record(self, store, job_id: str, result: BatchResult) -> None:
        """Make the result visible to the coordinator (and to `farm status`) through the store."""
        try:
            store.write_batch_result(job_id, result.to_dict())
        except OSError as e:
            raise TransientError(f"cannot write the batch result to the store: {e}") from e


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
    model_digest)` -> Frame and `forget(model)` (renderer.Renderer, or a stand-in).
    `on_frame(done, total, failed)` is called after each frame. `budgets` (default: from the
    environment, farm.run.budget) bounds each frame's wall time; a frame over a budget fails alone.
    """
    budgets = budgets or Budgets.from_env()
    kind = batch_kind(batch.kind)
    attempt = kind.begin(store, job_id, batch)
    total = len(batch.keys)
    frames: list[FrameResult] = []
    work: Work | None = None

    def finish(error: str | None = None) -> BatchResult:
        if error is not None:  # every frame not done yet fails with this reason
            done = {f.key for f in frames}
            pairs = work.frames if work is not None else list(zip(batch.keys, batch.times, strict=True))
            frames.extend(kind.failed(k, t, error, work) for k, t in pairs if k not in done)
        result = BatchResult(batch.id, frames, attempt)
        kind.record(store, job_id, result)
        if on_frame:
            on_frame(len(frames), len(frames), result.failed)
        return result

    if attempt > max_deliveries:
        return finish(kind.died_too_often(batch, attempt))
    try:
        model, digest = read_model_and_digest(batch.model)
    except abort:
        raise
    except Exception as e:  # noqa: BLE001 - the loader's failure is these frames' failure
        budget = over_budget(e, budgets)
        return finish(f"{batch.model_rel}: {budget}" if budget else error_text(e))
    try:
        work = kind.plan(batch, model, digest)
    except ValueError as e:
        return finish(str(e))
    renderer = acquire_renderer(renderer_factory, abort)
    failed = 0
    try:
        for key, t in work.frames:
            try:
                started = time.perf_counter()
                with frame_deadline(budgets.frame_seconds):
                    frame = renderer.render(model, batch.frame_spec(work.sequence, t), model_digest=digest)
                kept = kind.keep(batch, store, model, frame, key, t, work)
                kept.render_s = round(time.perf_counter() - started, 6)
                frames.append(kept)
            except abort as e:  # the frames done so far stay done
                return finish(f"{batch.model_rel}: batch time limit reached ({type(e).__name__})")
            except TransientError:
                raise
            except GLContextError as e:
                raise TransientError(f"GL failed in this process: {error_text(e)}") from e
            except Exception as e:  # noqa: BLE001 - this frame fails; the batch goes on (MemoryError too)
                budget = over_budget(e, budgets)
                frames.append(kind.failed(key, t, f"{batch.model_rel} at {t} ms: {budget or error_text(e)}", work))
                failed += 1
                if budget:  # what it built may be half made: start the model afresh
                    _forget(renderer, model)
            if on_frame:
                on_frame(len(frames), total, failed)
    finally:
        _forget(renderer, model)
    return finish()


def _forget(renderer, model) -> None:
    forget = getattr(renderer, "forget", None)
    if forget is not None:
        try:
            forget(model)
        except Exception:  # noqa: BLE001 - freeing must not hide the batch's outcome
            pass
