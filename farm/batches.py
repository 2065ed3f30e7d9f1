"""Jobs cut into batches, and the one batch runner every mode uses (local pool and Celery).

A job expands into traces: one per (model, sequence, timestamp) under the model's settings. A
*batch* is one model and one sequence with many timestamps, sorted ascending, so a worker loads
the model (and simulates its effects) once per batch and walks time forward.

A trace key names everything a manifest decides about a frame, as one stable string:

    models/crate.mdx|Stand|500ms|auto|64x64|msaa0|team0|transparent

(model path relative to the manifest, sequence name, ms from the sequence start, camera, size,
MSAA, team colour, background; ``|white`` is appended when missing textures are drawn plain
white instead of the default checker). '|' and '%' inside names are percent-escaped. A model with
no sequences has the sequence ``-`` (bind pose). The model's content hash, renderer version and GL
environment complete the trace in each image's metadata; they are not in the key, so a golden
can follow a trace across model edits and Mesa upgrades.

`render_batch(batch, renderer_factory, store, job_id)` renders a batch with whatever renderer
the factory returns (the process's GL renderer, or a stand-in), writes each frame to the store,
and returns a `BatchResult`. A model that fails to load, or a sequence it does not have, fails
that batch's frames with the loader's sentence; a frame that raises fails alone. Problems that
another process or machine may not have (no GL context, the store not writable) raise
`TransientError`, for the caller to retry elsewhere.

Nothing here imports GL; the renderer is imported when a batch runs.
"""

from __future__ import annotations

import fnmatch
import hashlib
import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

from farm.manifest import Manifest, ManifestError, ModelPlan, TraceThresholds

__all__ = [
    "Batch",
    "BatchResult",
    "FrameResult",
    "Plan",
    "TransientError",
    "expand_manifest",
    "expand_plan",
    "file_digest",
    "render_batch",
    "resolve_times",
    "trace_key",
]

# How many times a batch may be started (deliveries) before it is failed without rendering: a
# model that kills its worker process must not loop forever (see Store.begin_batch).
DEFAULT_MAX_DELIVERIES = 3


class TransientError(RuntimeError):
    """A failure of this process or machine, not of the frames: retry the batch elsewhere."""


def _esc(text: str) -> str:
    return str(text).replace("%", "%25").replace("|", "%7C")


def trace_key(model: str, sequence: str | None, time_ms: int, camera: str, width: int, height: int, msaa: int,
              team: int, background: str, missing_textures: str = "checker") -> str:
    parts = [_esc(model), "-" if sequence is None else _esc(sequence), f"{int(time_ms)}ms", _esc(camera),
             f"{int(width)}x{int(height)}", f"msaa{int(msaa)}", f"team{int(team)}", background]
    if missing_textures != "checker":
        parts.append(missing_textures)
    return "|".join(parts)


def file_digest(path: str | Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def resolve_times(plan: ModelPlan, length_ms: int) -> list[int]:
    """The plan's timestamps for a sequence `length_ms` long: ms as given, fractions of the length
    rounded to the nearest ms, or every N ms from 0 to the length; sorted, without repeats."""
    length = max(int(length_ms), 0)
    if plan.every is not None:
        return list(range(0, length + 1, plan.every))
    out = set()
    for t in plan.timestamps or (0,):
        if isinstance(t, str) and t.endswith("%"):
            out.add(int(round(float(t[:-1]) / 100.0 * length)))
        else:
            out.add(int(t))
    return sorted(out)


@dataclass
class Batch:
    """One model, one sequence, timestamps ascending; everything a worker needs, JSON-friendly."""

    model: str  # absolute path
    model_rel: str
    model_digest: str | None  # sha256 of the file when the job was planned (None: it did not load)
    sequence: int | str | None  # index (planned), name (to resolve when rendering), None (bind pose)
    sequence_name: str | None  # as it appears in the trace keys
    times: list[int]
    keys: list[str]
    width: int = 256
    height: int = 256
    msaa: int = 0
    background: str = "transparent"
    camera: str = "auto"
    team: int = 0
    missing_textures: str = "checker"
    assets: tuple = ()
    provisional: bool = False  # planned without reading the model: `farm retry` plans it again
    id: str = ""
    kind: str = "frames"  # what `render_batch` does with it: "frames", or a name in BATCH_KINDS
    params: dict = field(default_factory=dict)  # what a batch of another kind needs beyond the fields above

    def __post_init__(self):
        order = sorted(range(len(self.times)), key=lambda i: self.times[i])
        self.times = [int(self.times[i]) for i in order]
        self.keys = [self.keys[i] for i in order]
        self.assets = tuple(self.assets)
        if not self.id:
            self.id = self.compute_id()

    def compute_id(self) -> str:
        body = [self.model_rel, self.model_digest, self.sequence, self.keys]
        if self.kind != "frames":
            body += [self.kind, self.params]
        body = json.dumps(body, sort_keys=True)
        return hashlib.sha256(body.encode()).hexdigest()[:20]

    def subset(self, keys: Iterable[str]) -> Batch:
        """The same batch restricted to some of its traces (for retries); a new id."""
        keep = set(keys)
        idx = [i for i, k in enumerate(self.keys) if k in keep]
        d = self.to_dict()
        d.update(times=[self.times[i] for i in idx], keys=[self.keys[i] for i in idx], id="")
        return Batch.from_dict(d)

    def to_dict(self) -> dict:
        return {
            "id": self.id, "model": self.model, "model_rel": self.model_rel, "model_digest": self.model_digest,
            "sequence": self.sequence, "sequence_name": self.sequence_name, "times": list(self.times),
            "keys": list(self.keys), "width": self.width, "height": self.height, "msaa": self.msaa,
            "background": self.background, "camera": self.camera, "team": self.team,
            "missing_textures": self.missing_textures, "assets": list(self.assets), "provisional": self.provisional,
            **({"kind": self.kind, "params": dict(self.params)} if self.kind != "frames" else {}),
        }

    @classmethod
    def from_dict(cls, d: dict) -> Batch:
        return cls(**d)

    def frame_spec(self, sequence: int | None, time_ms: int):
        from renderer.frame import FrameSpec

        return FrameSpec(sequence=sequence, time_ms=int(time_ms), width=self.width, height=self.height,
                         camera=self.camera, team=self.team, msaa=self.msaa, background=self.background,
                         assets=tuple(self.assets), missing_textures=self.missing_textures)


@dataclass
class Plan:
    """A job, expanded: its batches and, per trace key, what the golden step needs to know."""

    batches: list[Batch]
    traces: dict[str, dict]  # key -> {model, sequence, time_ms, batch, thresholds}
    models: dict[str, dict] = field(default_factory=dict)  # model rel -> ModelPlan.to_dict()

    def merge(self, other: Plan) -> None:
        self.batches.extend(other.batches)
        self.traces.update(other.traces)
        self.models.update(other.models)


def _sequence_label(model, index: int) -> str:
    names = [str(s.name) for s in model.sequences]
    name = names[index]
    return name if names.count(name) == 1 else f"{name}#{index}"


def _find_sequence(model, key) -> int:
    try:
        from renderer.anim import find_sequence
    except ImportError:  # renderer.anim not there yet: exact names (case-insensitive) and indices
        names = [str(s.name).lower() for s in model.sequences]
        if isinstance(key, int) and 0 <= key < len(names):
            return key
        if isinstance(key, str) and key.lower() in names:
            return names.index(key.lower())
        listed = ", ".join(f"{i}: {s.name!r}" for i, s in enumerate(model.sequences)) or "none"
        raise ValueError(f"unknown sequence {key!r}; the model has {len(names)} sequence(s): {listed}") from None
    return find_sequence(model, key)


def expand_plan(plan: ModelPlan, trace_thresholds: list[TraceThresholds] = (), loader=None) -> Plan:
    """Batches and traces of one model. The model is read here (no GL) for its sequences and their
    lengths; when it cannot be read, the batches are provisional: their frames fail when rendered,
    with the loader's sentence, and `farm retry` plans them again."""
    load = loader or _load_model
    batches: list[Batch] = []
    common = dict(width=plan.width, height=plan.height, msaa=plan.msaa, background=plan.background,
                  camera=plan.camera, team=plan.team, missing_textures=plan.missing_textures, assets=plan.assets)

    def keys_for(seq_name, times):
        return [trace_key(plan.rel, seq_name, t, plan.camera, plan.width, plan.height, plan.msaa, plan.team,
                          plan.background, plan.missing_textures) for t in times]

    def provisional_times():
        return resolve_times(plan, 0) if plan.every is None else [0]

    try:
        digest = file_digest(plan.path)
        model = load(plan.path)
    except Exception:  # noqa: BLE001 - any loader failure: rendering reports it, frame by frame
        selectors = [None] if plan.sequences == "all" else list(plan.sequences)
        for sel in selectors:
            times = provisional_times()
            name = None if sel is None else str(sel)
            batches.append(Batch(plan.path, plan.rel, None, sel, name, times, keys_for(name, times),
                                 provisional=True, **common))
    else:
        n = len(model.sequences)
        if plan.sequences == "all":
            selected: list = list(range(n)) or [None]
        else:
            selected = list(plan.sequences)
        seen = set()
        for sel in selected:
            if sel is None:
                batches.append(Batch(plan.path, plan.rel, digest, None, None, resolve_times(plan, 0),
                                     keys_for(None, resolve_times(plan, 0)), **common))
                continue
            try:
                index = sel if plan.sequences == "all" else _find_sequence(model, sel)
            except ValueError:  # not in this model: its frames fail with the list of sequences it has
                times = provisional_times()
                batches.append(Batch(plan.path, plan.rel, digest, str(sel), str(sel), times,
                                     keys_for(str(sel), times), provisional=True, **common))
                continue
            if index in seen:
                continue
            seen.add(index)
            start, end = model.sequences[index].interval
            times = resolve_times(plan, int(end) - int(start))
            label = _sequence_label(model, index)
            batches.append(Batch(plan.path, plan.rel, digest, index, label, times, keys_for(label, times),
                                 **common))
    traces: dict[str, dict] = {}
    for b in batches:
        for t, k in zip(b.times, b.keys, strict=True):
            thresholds = dict(plan.thresholds)
            for tt in trace_thresholds:
                if fnmatch.fnmatchcase(k, tt.match):
                    thresholds.update(tt.values)
            traces[k] = {"model": plan.rel, "sequence": b.sequence_name, "time_ms": t, "batch": b.id,
                         "thresholds": thresholds}
    return Plan(batches, traces, {plan.rel: plan.to_dict()})


def _load_model(path: str):
    from renderer.formats import load_model

    return load_model(path, strict=False)


def expand_manifest(manifest: Manifest, loader=None) -> Plan:
    """Every model of the manifest, expanded. A `[[thresholds.traces]]` glob that matches no trace
    is a ManifestError naming its line."""
    plan = Plan([], {}, {})
    for mp in manifest.plans:
        plan.merge(expand_plan(mp, manifest.trace_thresholds, loader))
    for tt in manifest.trace_thresholds:
        if not any(fnmatch.fnmatchcase(k, tt.match) for k in plan.traces):
            example = next(iter(plan.traces), "?")
            raise ManifestError(manifest.shown_as or manifest.path, tt.line,
                                f"[[thresholds.traces]] match {tt.match!r} matches no trace of this job (keys look"
                                f" like {example!r})")
    return plan


# --------------------------------------------------------------------------------------------
# Rendering a batch


@dataclass
class FrameResult:
    key: str
    time_ms: int
    status: str  # "done" | "failed"
    digest: str | None = None
    error: str | None = None
    info: dict | None = None  # what a batch of another kind reports about the frame (JSON-ready)

    def to_dict(self) -> dict:
        return {"key": self.key, "time_ms": self.time_ms, "status": self.status, "digest": self.digest,
                "error": self.error, **({"info": self.info} if self.info is not None else {})}


@dataclass
class BatchResult:
    batch: str
    frames: list[FrameResult]
    attempt: int = 1

    @property
    def failed(self) -> int:
        return sum(f.status != "done" for f in self.frames)

    def to_dict(self) -> dict:
        # No time, host or process in here: a redelivered batch writes the same result.
        return {"batch": self.batch, "frames": [f.to_dict() for f in self.frames]}

    @classmethod
    def from_dict(cls, d: dict) -> BatchResult:
        return cls(d["batch"], [FrameResult(**f) for f in d["frames"]])


def _fail_all(batch: Batch, error: str, frames: list[FrameResult] | None = None) -> list[FrameResult]:
    done = {f.key for f in frames or []}
    out = list(frames or [])
    out.extend(FrameResult(k, t, "failed", error=error) for t, k in zip(batch.times, batch.keys, strict=True)
               if k not in done)
    return out


def _error_text(e: BaseException) -> str:
    sentence = getattr(e, "sentence", None)
    if callable(sentence):
        try:
            return sentence()
        except Exception:  # noqa: BLE001
            pass
    return f"{type(e).__name__}: {e}"


def acquire_renderer(renderer_factory, abort: tuple = ()):
    """This process's renderer. A failure is transient: another process may have a GL context."""
    try:
        return renderer_factory()
    except abort:
        raise
    except Exception as e:  # no GL here: another process may have it
        raise TransientError(f"no renderer in this process: {_error_text(e)}") from e


def render_batch(batch: Batch, renderer_factory: Callable[[], object], store, job_id: str,
                 on_frame: Callable[[int, int, int], None] | None = None, abort: tuple = (),
                 max_deliveries: int = DEFAULT_MAX_DELIVERIES) -> BatchResult:
    """Render every frame of `batch` into `store` and record the result under `job_id`.

    `renderer_factory()` returns this process's renderer: an object with `render(model, spec,
    model_digest)` -> Frame and `forget(model)` (renderer.frame.Renderer, or a stand-in).
    `on_frame(done, total, failed)` is called after each frame. Exceptions in `abort` (a Celery
    soft time limit) stop the batch: the frames not rendered yet fail with that reason.

    A batch of another kind (``batch.kind`` other than "frames") goes to its own function in
    BATCH_KINDS, with these same arguments, in the same worker processes.
    """
    from renderer.png import png_bytes

    if batch.kind != "frames":
        return batch_kind(batch.kind)(batch, renderer_factory, store, job_id, on_frame=on_frame, abort=abort,
                                      max_deliveries=max_deliveries)
    attempt = store.begin_batch(job_id, batch.id)
    total = len(batch.keys)
    frames: list[FrameResult] = []

    def finish(result_frames: list[FrameResult]) -> BatchResult:
        result = BatchResult(batch.id, result_frames, attempt)
        try:
            store.write_batch_result(job_id, result.to_dict())
        except OSError as e:
            raise TransientError(f"cannot write the batch result to the store: {e}") from e
        if on_frame:
            on_frame(total, total, result.failed)
        return result

    if attempt > max_deliveries:
        return finish(_fail_all(batch, f"the worker process died {attempt - 1} times rendering this batch"
                                       f" (model {batch.model_rel}); not trying again"))
    try:
        digest = file_digest(batch.model)
        model = _load_model(batch.model)
    except abort:
        raise
    except Exception as e:  # noqa: BLE001 - the loader's failure is these frames' failure
        return finish(_fail_all(batch, _error_text(e)))
    if batch.model_digest is not None and digest != batch.model_digest:
        return finish(_fail_all(batch, f"{batch.model_rel}: the file changed since the job was planned (sha256"
                                       f" {batch.model_digest[:12]}..., now {digest[:12]}...); plan the job again"))
    if batch.provisional and batch.model_digest is None:
        return finish(_fail_all(batch, f"{batch.model_rel}: the model did not load when the job was planned and"
                                       f" loads now; `farm retry JOB --failed` plans it again"))
    try:
        if isinstance(batch.sequence, int) or batch.sequence is None:
            seq = batch.sequence
            if seq is not None and not (0 <= seq < len(model.sequences)):
                raise ValueError(f"sequence index {seq} is out of range (the model has {len(model.sequences)})")
        else:
            seq = _find_sequence(model, batch.sequence)
    except ValueError as e:
        return finish(_fail_all(batch, f"{batch.model_rel}: {e}"))
    renderer = acquire_renderer(renderer_factory, abort)
    failed = 0
    gl_errors = _gl_errors()
    try:
        for t, key in zip(batch.times, batch.keys, strict=True):
            try:
                try:
                    frame = renderer.render(model, batch.frame_spec(seq, t), model_digest=digest)
                    data = png_bytes(frame.rgba, frame.trace)
                except abort:
                    raise
                except gl_errors as e:
                    raise TransientError(f"GL failed in this process: {_error_text(e)}") from e
                except Exception as e:  # noqa: BLE001 - this frame fails; the batch goes on
                    frames.append(FrameResult(key, t, "failed", error=f"{batch.model_rel} at {t} ms: {_error_text(e)}"))
                    failed += 1
                else:
                    meta = {"trace": frame.trace, "diagnostics": [_diag(d) for d in frame.diagnostics]}
                    try:
                        image = store.put_image(data, meta)
                    except OSError as e:
                        raise TransientError(f"cannot write to the store: {e}") from e
                    frames.append(FrameResult(key, t, "done", digest=image))
                if on_frame:
                    on_frame(len(frames), total, failed)
            except abort as e:  # the frames done so far stay done
                return finish(_fail_all(batch, f"batch time limit reached ({type(e).__name__})", frames))
    finally:
        forget = getattr(renderer, "forget", None)
        if forget is not None:
            try:
                forget(model)
            except Exception:  # noqa: BLE001 - freeing must not hide the batch's outcome
                pass
    return finish(frames)


# Batches of other kinds, run by both runners (local pool, Celery) exactly like frame batches: name ->
# "module:function" with render_batch's signature, returning a BatchResult. Only names listed here
# run (the name comes from the batch, which may come from a broker), imported when first used.
BATCH_KINDS: dict[str, str] = {
    "thumbnail": "farm.thumbs.work:render_thumbnail_batch",  # `farm thumbnails`: one model, one image
}


def batch_kind(kind: str) -> Callable:
    import importlib

    try:
        module, _, name = BATCH_KINDS[kind].partition(":")
    except KeyError:
        raise ValueError(f"unknown batch kind {kind!r} (known: frames, {', '.join(sorted(BATCH_KINDS))})") from None
    return getattr(importlib.import_module(module), name)


def _gl_errors() -> tuple:
    try:
        from renderer.gl import GLContextError
    except ImportError:
        return ()
    return (GLContextError,)


def _diag(d) -> dict:
    as_dict = getattr(d, "as_dict", None)
    return as_dict() if callable(as_dict) else {"message": str(d)}
