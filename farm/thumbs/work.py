"""The worker side of `farm thumbnails`: one model in, one encoded image and its facts out.

`render_thumbnail_batch` is the "thumbnail" batch kind (farm.batches.BATCH_KINDS): both runners
call it in their worker processes exactly as they call `render_batch` for frames, with the
process's renderer (farm.worker: one GL context per process, never in the parent). It returns a
`BatchResult` with one `FrameResult` whose ``info`` carries the encoded image (base64) and what the
index shows, so the coordinator alone writes the output folder; workers need to see the models at
the same paths, not the output folder.

Sequence choice (`choose_sequence`): the asked one (case-insensitive, ``renderer.anim.find_sequence``
rules: "stand" also finds "Stand 1", a string of digits is an index) when the model has it; else
Portrait when nothing was asked and the model has one; else Stand; else the first sequence; else
none (bind pose). Time (`default_time`): the middle of the chosen sequence unless one was asked:
on the corpus this shows particles and ribbons that have not spawned at the sequence start, and the
same pose as the start for still models; 0 without a sequence.
"""

from __future__ import annotations

import base64
import hashlib
import io

from farm.batches import (
    DEFAULT_MAX_DELIVERIES,
    Batch,
    BatchResult,
    FrameResult,
    TransientError,
    _diag,
    _error_text,
    _gl_errors,
    acquire_renderer,
    file_digest,
)

__all__ = ["FORMATS", "choose_sequence", "default_time", "encode_image", "model_facts", "render_thumbnail_batch"]

FORMATS = ("png", "webp")
MAX_DIAGNOSTICS = 20  # listed per model in the index (the count is always complete)


def choose_sequence(model, asked: str | None) -> tuple[int | None, str]:
    """(sequence index or None, rule): rule is asked, portrait, stand, first or none."""
    from renderer.anim import UnknownSequence, find_sequence

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


def default_time(model, seq: int | None) -> int:
    """The middle of the sequence, in ms from its start (0 without a sequence)."""
    if seq is None:
        return 0
    start, end = model.sequences[seq].interval
    return max(int(end) - int(start), 0) // 2


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


def encode_image(rgba, trace: dict, fmt: str) -> bytes:
    """PNG with the trace in its text chunk, or lossless WebP (its trace goes in a JSON sidecar)."""
    if fmt == "png":
        from renderer.png import png_bytes

        return png_bytes(rgba, trace)
    if fmt == "webp":
        import numpy as np
        from PIL import Image

        buf = io.BytesIO()
        Image.fromarray(np.ascontiguousarray(rgba, np.uint8), "RGBA").save(buf, "WEBP", lossless=True, quality=80,
                                                                          method=4, exact=True)
        return buf.getvalue()
    raise ValueError(f"thumbnail format must be one of {', '.join(FORMATS)}, not {fmt!r}")


def render_thumbnail_batch(batch: Batch, renderer_factory, store, job_id: str, on_frame=None, abort: tuple = (),
                           max_deliveries: int = DEFAULT_MAX_DELIVERIES) -> BatchResult:
    """Render `batch` (one model) into one thumbnail; `render_batch`'s signature and failure rules:
    a model that does not load or render fails with the reason; no GL in this process raises
    TransientError (the runner retries elsewhere)."""
    from renderer.formats import load_model

    params = batch.params
    fmt = params.get("format", "png")
    key = batch.keys[0]
    try:  # deliveries bound a model that kills its process (local pool and Celery alike)
        attempt = store.begin_batch(job_id, batch.id)
    except OSError:  # a worker that cannot write the coordinator's folder: no bound, but no failure
        attempt = 1
    facts: dict = {"sha256": batch.model_digest}

    def finish(frame: FrameResult) -> BatchResult:
        if on_frame:
            on_frame(1, 1, int(frame.status != "done"))
        return BatchResult(batch.id, [frame], attempt)

    def fail(error: str, time_ms: int = 0) -> BatchResult:
        return finish(FrameResult(key, time_ms, "failed", error=error, info=facts))

    if attempt > max_deliveries:
        return fail(f"the worker process died {attempt - 1} times rendering {batch.model_rel}; not trying again")
    try:
        facts["sha256"] = file_digest(batch.model)
        model = load_model(batch.model, strict=False)
        facts.update(model_facts(model))
        seq, rule = choose_sequence(model, batch.sequence)
        time_ms = default_time(model, seq) if params.get("time") is None else int(params["time"])
    except abort:
        raise
    except Exception as e:  # noqa: BLE001 - the loader's failure is this model's failure
        return fail(_error_text(e))
    facts.update(sequence=None if seq is None else str(model.sequences[seq].name), sequence_index=seq,
                 sequence_rule=rule, time_ms=time_ms)
    renderer = acquire_renderer(renderer_factory, abort)
    try:
        frame = renderer.render(model, batch.frame_spec(seq, time_ms), model_digest=facts["sha256"])
        data = encode_image(frame.rgba, frame.trace, fmt)
    except abort as e:
        return fail(f"{batch.model_rel}: time limit reached ({type(e).__name__})", time_ms)
    except _gl_errors() as e:
        raise TransientError(f"GL failed in this process: {_error_text(e)}") from e
    except Exception as e:  # noqa: BLE001 - this model fails; the run goes on
        return fail(f"{batch.model_rel} at {time_ms} ms: {_error_text(e)}", time_ms)
    finally:
        forget = getattr(renderer, "forget", None)
        if forget is not None:
            try:
                forget(model)
            except Exception:  # noqa: BLE001 - freeing must not hide the outcome
                pass
    diagnostics: list[dict] = []
    for d in [*getattr(model, "diagnostics", []), *frame.diagnostics]:  # the loader's, then textures'/animation's
        d = _diag(d)
        if d not in diagnostics:
            diagnostics.append(d)
    facts.update(trace=frame.trace, diagnostics=diagnostics[:MAX_DIAGNOSTICS], diagnostic_count=len(diagnostics),
                 bytes=len(data), image=base64.b64encode(data).decode("ascii"))
    return finish(FrameResult(key, time_ms, "done", digest=hashlib.sha256(data).hexdigest(), info=facts))
