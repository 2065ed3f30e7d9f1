"""The worker side of `farm thumbnails`: one model in, one encoded image and its facts out.

`THUMBNAIL` is the "thumbnail" batch kind (farm.run.execute.BATCH_KINDS): both runners run it in
their worker processes through the same `render_batch` skeleton as frame batches, with the
process's renderer (farm.run.worker: one GL context per process, never in the parent). Its result
is one `FrameResult` whose ``info`` carries the encoded image (base64) and what the index shows,
so the coordinator writes the output folder; workers need to see the models at the same paths, not
the output folder. A local pool's worker (the batch's ``params["write"]``) writes the still into the
output folder itself, atomically, and its result names it (``written``) instead of carrying it: the
coordinator then only links its digest-keyed copy and records it.

Sequence choice (`choose_sequence`): the asked one (case-insensitive, ``renderer.anim.find_sequence``
rules: "stand" also finds "Stand 1", a string of digits is an index) when the model has it; else
Portrait when nothing was asked and the model has one; else Stand; else the first sequence; else
none (bind pose). Time and camera: the default look of farm.look (`default_time`, the middle of the
chosen sequence, unless --time was asked; the ``fit`` camera unless --camera was), the same rule as
`farm render` and `farm view`. A blank frame's entry carries farm.look.blank_warning's sentence
(``blank``), which the summary prints.

Animated (``params["animated_frames"]`` N, `farm thumbnails --animated --frames N`): after the still
(the poster), N frames evenly over the chosen sequence (`animation_times`), encoded by
farm.images.encode_animation in the thumbnails' format; the last frame's result carries the
animation and its sidecar (every frame's time, duration and trace). A model without a sequence,
or one of 0 ms, has no animation: its still is all there is to see.
"""

from __future__ import annotations

import base64
import hashlib
from dataclasses import dataclass, field
from pathlib import Path

from farm.files import atomic_write
from farm.images import animation_sidecar, blank_reason, encode_animation, encode_image, frame_durations
from farm.look import blank_warning, default_time, sequence_length
from farm.plan.batches import Batch
from farm.run.execute import BatchKind, BatchResult, FrameResult, Work, diag_dict, missing_names
from renderer.anim import UnknownSequence, find_sequence

__all__ = ["ANIMATION_KEY", "CAUSES", "OUTSIDE", "THUMBNAIL", "ThumbnailKind", "animation_keys", "animation_times",
           "choose_sequence", "failure_cause", "model_facts"]

# Why a model failed (its index entry's ``cause``): "model" (its own bytes or drawing: a rerun with the
# same inputs and settings fails the same way, so it is not tried again without --retry-failed), "input"
# (a file the worker could not read: not there, or not readable there) or "worker" (the farm lost it: a
# worker that died or vanished, a broker or store error). The last two are OUTSIDE the model: tried
# again on every run, and `farm thumbnails` exits 1 when any is left.
CAUSES = ("model", "input", "worker")
OUTSIDE = ("input", "worker")
_UNREADABLE = ("cannot read file:", "inputs cannot be read")  # the loaders' and farm.run.inputs' words
_OS_ERRORS = tuple(f"{name}: " for name, v in vars(__import__("builtins")).items()
                   if isinstance(v, type) and issubclass(v, OSError))


def failure_cause(error: str, loaded: bool) -> str:
    """The cause of a thumbnail's failure: "input" when the model never loaded because its bytes (or
    its travelling inputs) could not be read, else "model"."""
    if not loaded and (any(m in error for m in _UNREADABLE) or error.startswith(_OS_ERRORS)):
        return "input"
    return "model"


MAX_DIAGNOSTICS = 20  # listed per model in the index (the count is always complete)
ANIMATION_KEY = "{id}\x00frame{i:04d}"  # the batch key of an animation frame: never a model id (no NUL in names)


def animation_keys(model_id: str, n: int) -> list[str]:
    """The batch keys of a model's N animation frames, after its own (the poster's)."""
    return [ANIMATION_KEY.format(id=model_id, i=i) for i in range(n)]


def animation_times(model, seq: int | None, n: int) -> list[int]:
    """N ms evenly over the sequence, from its start, the last one a step before its end (the loop
    goes back to the start); none when there is no sequence or it lasts 0 ms."""
    length = sequence_length(model, seq)
    return [i * length // n for i in range(n)] if length else []  # n < 1: range(n) is empty


@dataclass
class ThumbnailWork(Work):
    """A thumbnail's work: the poster, then the animation frames, collected until the last one."""

    shots: list = field(default_factory=list)  # (rgba, trace, diagnostics) of each animation frame rendered


def choose_sequence(model, asked: str | None) -> tuple[int | None, str]:
    """(sequence index or None, rule): rule is asked, portrait, stand, first or none."""
    def find(name):
        try:
            return find_sequence(model, name)
        except UnknownSequence:
            return None

    if asked:
        i = find(asked)
        if i is not None:
            return i, "asked"
    else:
        i = find("Portrait")
        if i is not None:
            return i, "portrait"
    i = find("Stand")
    if i is not None:
        return i, "stand"
    if model.sequences:
        return 0, "first"
    return None, "none"


def model_facts(model) -> dict:
    geosets = list(model.geosets)
    return {
        "name": str(model.name or ""),
        "model_format": str(getattr(model, "format", "") or ""),
        "version": int(model.version) if getattr(model, "version", None) is not None else None,
        "geosets": len(geosets),
        "vertices": int(sum(len(g.vertices) for g in geosets)),
        "triangles": int(sum(len(g.triangles) for g in geosets)),
        "sequences": [str(s.name) for s in model.sequences],
    }


def _write_still(where: dict | None, data: bytes) -> str | None:
    """A local pool's worker writes the still into the output folder itself (`params["write"]`: out,
    tmp, thumbnail), atomically, so no image crosses to the coordinator; returns the thumbnail's
    path, or None (not asked, or it cannot write there: the image then travels in the result)."""
    if not where:
        return None
    try:
        atomic_write(Path(where["out"]) / where["thumbnail"], data, where["tmp"])
    except (OSError, KeyError, TypeError):
        return None
    return where["thumbnail"]


class ThumbnailKind(BatchKind):
    """One model, one image: the sequence and time are chosen here (`choose_sequence`,
    `default_time`), the image is encoded and returned in the frame's ``info`` (the coordinator
    writes the output folder), and nothing is written to the store but the delivery count."""

    name = "thumbnail"

    def begin(self, store, job_id: str, batch: Batch) -> int:
        try:  # deliveries bound a model that kills its process (local pool and Celery alike)
            return store.begin_batch(job_id, batch.id)
        except OSError:  # a worker that cannot write the coordinator's folder: no bound, but no failure
            return 1

    def died_too_often(self, batch: Batch, deaths: int) -> str:
        return f"the worker process died {deaths} times rendering {batch.model_rel}; not trying again"

    def plan(self, batch: Batch, model, digest: str) -> Work:
        facts = {"sha256": digest, **model_facts(model)}
        seq, rule = choose_sequence(model, batch.sequence)
        params = batch.params
        time_ms = default_time(model, seq) if params.get("time") is None else int(params["time"])
        facts.update(sequence=None if seq is None else str(model.sequences[seq].name), sequence_index=seq,
                     sequence_rule=rule, time_ms=time_ms)
        times = animation_times(model, seq, int(params.get("animated_frames") or 0))
        return ThumbnailWork(seq, [(batch.keys[0], time_ms), *zip(batch.keys[1:len(times) + 1], times, strict=True)],
                             facts)

    def keep(self, batch: Batch, store, model, frame, key: str, time_ms: int, work: Work) -> FrameResult:
        if key != batch.keys[0]:
            return self._keep_animation(batch, frame, key, time_ms, work)
        data = encode_image(frame.rgba, frame.trace, batch.params.get("format", "png"))
        diagnostics: list[dict] = []
        for d in [*getattr(model, "diagnostics", []), *frame.diagnostics]:  # the loader's, then textures'/animation's
            d = diag_dict(d)
            if d not in diagnostics:
                diagnostics.append(d)
        missing = missing_names(list(getattr(frame, "assets", []) or []))
        reason = blank_reason(frame.rgba)
        blank = None if reason is None else blank_warning(batch.model_rel, model, work.sequence, time_ms, reason,
                                                          batch.model)
        written = _write_still(batch.params.get("write"), data)
        facts = dict(work.facts, trace=frame.trace, blank=blank, diagnostics=diagnostics[:MAX_DIAGNOSTICS],
                     missing=missing, assets=list(getattr(frame, "assets", []) or []),
                     diagnostic_count=len(diagnostics), bytes=len(data),
                     **({"written": written} if written else {"image": base64.b64encode(data).decode("ascii")}))
        return FrameResult(key, time_ms, "done", digest=hashlib.sha256(data).hexdigest(), info=facts)

    def _keep_animation(self, batch: Batch, frame, key: str, time_ms: int, work: ThumbnailWork) -> FrameResult:
        """An animation frame: kept in `work` until the last one, whose result carries the animation
        (base64) and its sidecar; when a frame before it failed, no animation (the still stays)."""
        work.shots.append((time_ms, frame.rgba.copy(), frame.trace, [diag_dict(d) for d in frame.diagnostics]))
        if key != work.frames[-1][0] or len(work.shots) != len(work.frames) - 1:
            return FrameResult(key, time_ms, "done")
        fmt = batch.params.get("format", "png")
        times = [s[0] for s in work.shots]
        durations = frame_durations(times)
        data = encode_animation([s[1] for s in work.shots], durations, fmt)
        sidecar = animation_sidecar(fmt, times, durations, [s[2] for s in work.shots], [s[3] for s in work.shots])
        work.shots.clear()
        return FrameResult(key, time_ms, "done", digest=hashlib.sha256(data).hexdigest(),
                           info={"animation": base64.b64encode(data).decode("ascii"), "animation_sidecar": sidecar})

    def failed(self, key: str, time_ms: int, error: str, work: Work | None) -> FrameResult:
        info = dict(work.facts) if work else {"sha256": None}
        return FrameResult(key, time_ms, "failed", error=error,
                           info={**info, "cause": failure_cause(error, work is not None)})

    def record(self, store, job_id: str, result: BatchResult) -> None:
        pass  # the coordinator records what it receives

    def keep_result(self, store, job_id: str, result: BatchResult) -> None:
        """A model of an envelope that a Celery worker finished: its result (image and facts) kept in
        the runner's store, where a redelivery finds it done (`done_before`) and the coordinator finds
        it when the envelope is lost; a worker that cannot write there only loses that."""
        try:
            store.write_batch_result(job_id, result.to_dict())
        except OSError:
            pass

    def record_along(self, store, job_id: str, result: BatchResult) -> None:
        pass  # nor along the way


THUMBNAIL = ThumbnailKind()
