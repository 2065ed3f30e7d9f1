"""`make_thumbnails`: find the models, render what changed, write thumbnails, sheets and the index.

The coordinator (this process) never loads GL: it hashes the model files, decides what to render,
makes one "thumbnail" batch per model and sends them many to a delivery (envelopes of up to
FARM_BATCH_FRAMES models: farm.plan.envelopes) to the farm's runner (farm.run.local's process pool,
or Celery workers with a broker: the same worker code either way) and writes everything in the output
folder itself, from the images the workers return:

    DIR/thumbs/<id>.png          one per model that rendered (trace in the PNG text chunk)
    DIR/thumbs/<id>.webp(.json)  with --format webp: the image and its trace/diagnostics sidecar
    DIR/thumbs/<id>.anim.png     with --animated: the looping animation (APNG, or .anim.webp), and
    DIR/thumbs/<id>.anim.png.json  its sidecar (every frame's time, duration and trace); the still is its poster
    DIR/sheets/sheet-0001.png    contact sheets, N models each (--sheet N; 0: none)
    DIR/index.json, index.html   every model, failed ones with their error
    DIR/.farm/                   incremental state, journal, lock, temporary files

    DIR/by-sha256/<model sha256>-<options>.png   the same image under the model's content digest and
                                 the options' fingerprint (index.json: digest_thumbnail): a key a CDN may cache

A model is skipped when its file's sha256 and the options fingerprint equal its record and its
thumbnail (and animation) is still there. A model that failed for a reason of its own (cause
"model", farm.thumbs.work.CAUSES) is skipped the same way when its bytes, options and inputs are
unchanged since that failure (its entry keeps the failure); `--retry-failed` tries it again. Failures
outside the model (an input a worker could not read, a lost worker) are tried again on every run,
and leave the run's exit status 1. Thumbnails of models that are gone, or that now fail, are
removed; nothing else in DIR is touched.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import secrets
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from farm.environment import broker_url
from farm.files import atomic_write, atomic_write_json
from farm.images import IMAGE_FORMATS, image_sidecar
from farm.look import DEFAULT_CAMERA
from farm.plan.batches import Batch, model_digest
from farm.run.dispatch import mode, run_batches
from farm.run.execute import BatchResult
from farm.run.inputs import INPUT_MODES, publish, travels
from farm.run.progress import Progress
from farm.run.sandbox import untrusted
from farm.settings import RenderSettings, SettingError, check_assets, check_game, check_size
from farm.store import is_url, open_store
from farm.store.mirror import TreeMirror
from farm.thumbs.find import Found, asset_roots_for, find_models, root_labels
from farm.thumbs.index import ENTRY_KEYS, FORMAT, write_index
from farm.thumbs.sheets import SHEET_VERSION, draw_sheet, sheet_bytes
from farm.thumbs.state import FILE_KEYS, ThumbState, fingerprint
from farm.thumbs.work import OUTSIDE, animation_keys
from renderer.assets import read_source
from renderer.assets.paths import safe_relative
from renderer.errors import FormatError
from renderer.frame import RENDERER_VERSION
from renderer.gl.threads import available_cores

__all__ = ["Summary", "ThumbnailError", "ThumbnailOptions", "make_thumbnails"]

THUMBNAIL_VERSION = 2  # bump when what a thumbnail shows changes for the same options (2: the fit-v2 camera)
MAX_ANIMATION_FRAMES = 240  # --frames: at most this many frames in an animated thumbnail
DIGEST_FOLDER = "by-sha256"  # DIR/by-sha256/<model sha256>-<options fingerprint>.<format>: content-keyed copies


class ThumbnailError(ValueError):
    """Bad roots or options, or the output folder in use; the message says what to do."""


# How thumbnails are drawn unless told otherwise: 4x MSAA and farm.look's default look ("auto", a CAMS
# name or an explicit camera win); the other settings are RenderSettings' defaults.
THUMBNAIL_RENDER = RenderSettings(msaa=4, camera=DEFAULT_CAMERA)


@dataclass(frozen=True)
class ThumbnailOptions:
    size: int = 256
    sequence: str | None = None  # asked sequence; None: Portrait, else Stand, else the first
    time: int | None = None  # ms from the sequence start; None: the middle of the sequence
    format: str = "png"
    animated: bool = False  # also an animated thumbnail: `frames` frames evenly over the chosen sequence
    frames: int = 16
    sheet: int = 64  # models per contact sheet; 0: no sheets
    assets: tuple = ()  # asset roots after each model's own folders and the roots
    # Team, MSAA, camera, missing-texture mode, game data (checked by farm.settings.check_game), searched
    # last: the settings of every thumbnail, whose size and asset roots `settings` sets per thumbnail.
    render: RenderSettings = THUMBNAIL_RENDER
    follow_links: bool = False  # models, archives and textures through links out of the roots: refused unless set

    def check(self) -> None:
        if self.format not in IMAGE_FORMATS:
            raise ThumbnailError(f"--format must be one of {', '.join(IMAGE_FORMATS)}, not {self.format!r}")
        if self.time is not None and int(self.time) < 0:
            raise ThumbnailError(f"--time must be >= 0 ms, not {self.time}")
        if self.animated and not 2 <= int(self.frames) <= MAX_ANIMATION_FRAMES:
            raise ThumbnailError(f"--frames must be 2..{MAX_ANIMATION_FRAMES}, not {self.frames}")
        if int(self.sheet) < 0:
            raise ThumbnailError(f"--sheet must be >= 0, not {self.sheet}")
        try:
            check_size(self.size, "--size")  # the one size rule (farm.settings), as render and run have it
            self.settings()
            check_assets(self.assets, "--assets")
            check_game(self.render.game, "--game")
        except SettingError as e:
            raise ThumbnailError(str(e)) from None

    def settings(self, assets: tuple = ()) -> RenderSettings:
        """The render settings of every thumbnail (farm.settings' rules), with these asset roots."""
        return self.render.replace(width=int(self.size), height=int(self.size), assets=tuple(assets),
                                   follow_links=bool(self.follow_links))


@dataclass
class Summary:
    out: Path
    models: int = 0
    rendered: list[str] = field(default_factory=list)  # ids rendered this run (done or failed)
    skipped: int = 0  # up to date
    failed: dict[str, str] = field(default_factory=dict)  # id -> error, for every model failing now
    causes: dict[str, str] = field(default_factory=dict)  # id -> cause (farm.thumbs.work.CAUSES), for the failed
    kept_failed: int = 0  # failed before for a reason of their own, unchanged since: not tried again
    blank: dict[str, str] = field(default_factory=dict)  # id -> farm.look.blank_warning, for every blank thumbnail
    warnings: dict[str, list] = field(default_factory=dict)  # id -> [missing names, diagnostics], rendered now
    sheets_written: int = 0
    listing_errors: list[str] = field(default_factory=list)  # archives whose models could not be listed
    seconds: float = 0.0
    mode: str = "local"
    shown: str | None = None  # where the index is, when not in `out` (an s3:// output)

    @property
    def done(self) -> int:
        return self.models - len(self.failed)

    @property
    def outside(self) -> list[str]:
        """The models failing for a reason outside the model (an input not read, a lost worker)."""
        return [i for i in self.failed if self.causes.get(i) in OUTSIDE]

    def text(self, limit: int = 20, verbose: bool = False) -> str:
        kept = f", {self.kept_failed} of them unchanged since they failed (--retry-failed)" if self.kept_failed else ""
        lines = [f"thumbnails: {self.models} models: {len(self.rendered) - len(self.failed) + self.kept_failed}"
                 f" rendered, {self.skipped} up to date, {len(self.failed)} failed{kept}"
                 f" ({self.mode}, {self.seconds:.1f} s) -> {self.shown or self.out / 'index.html'}"]
        for e in self.listing_errors:
            lines.append(f"warning: {e}")
        if self.failed:
            lines.append("failed (placeholder tiles, errors in index.json):")
            for model_id, error in list(self.failed.items())[:limit]:
                cause = self.causes.get(model_id)
                lines.append(f"  {model_id}: {error}" + (f" [{cause}: not the model's fault]" if cause in OUTSIDE
                                                         else ""))
            if len(self.failed) > limit:
                lines.append(f"  ... and {len(self.failed) - limit} more")
        lines.extend(self._warning_lines(limit, verbose))
        for warning in list(self.blank.values())[:limit]:
            lines.append(f"warning: {warning}")
        if len(self.blank) > limit:
            lines.append(f"warning: ... and {len(self.blank) - limit} more blank thumbnails (index.json: blank)")
        # printable anywhere: a name from bytes that are not UTF-8 shows its \udcXX escapes (as index.json)
        return "\n".join(lines).encode("utf-8", "backslashreplace").decode("utf-8")

    def _warning_lines(self, limit: int, verbose: bool) -> list[str]:
        """One line per model rendered with warnings, with counts (index.json and the sidecar hold
        them); `verbose` (-v): every one of them, each on its own line."""
        lines = []
        for model_id, (missing, diagnostics, count) in list(self.warnings.items())[:None if verbose else limit]:
            parts = [f"{len(missing)} texture(s) not found"] if missing else []
            others = count - len(missing)
            if others > 0:
                parts.append(f"{others} other diagnostic(s)")
            if parts:
                more = "" if verbose else " (index.json; -v lists them)"
                lines.append(f"warning: {model_id}: {', '.join(parts)}{more}")
            if verbose:
                lines.extend(f"  {d.get('where', '')}: {d.get('message', '')}" for d in diagnostics)
        if not verbose and len(self.warnings) > limit:
            lines.append(f"warning: ... and {len(self.warnings) - limit} more models with warnings (index.json)")
        return lines


def _thumb_rel(model_id: str, fmt: str) -> str:
    """Where a model's thumbnail goes: ids come from file and archive entry names, which may hold
    '..', a leading '/', backslashes or overlong components; safe_relative keeps it under thumbs/."""
    return f"thumbs/{safe_relative(model_id)}.{fmt}"


def _render_options(opts: ThumbnailOptions, assets: list[str]) -> dict:
    rs = opts.render
    return {"thumbnail_version": THUMBNAIL_VERSION, "renderer_version": RENDERER_VERSION, "size": int(opts.size),
            "sequence": opts.sequence, "time": opts.time, "format": opts.format, "team": rs.team,
            "msaa": rs.msaa, "missing_textures": rs.missing_textures, "assets": assets,
            "camera": rs.camera, **({"game": list(rs.game)} if rs.game else {})}


def _animation_options(opts: ThumbnailOptions) -> dict:
    """What --animated adds to the options (fingerprint, index.json): nothing without it, so the
    thumbnails of a run without --animated stay up to date and index.json keeps its bytes."""
    return {"animated": True, "frames": int(opts.frames)} if opts.animated else {}


def _batch(found: Found, digest: str, opts: ThumbnailOptions, assets: list[str],
           settings: RenderSettings | None = None, write_to: tuple[Path, Path] | None = None) -> Batch:
    """The model's batch: its still (key: the model id), then with --animated one key per animation
    frame (farm.thumbs.work.animation_keys; the worker picks their times on the chosen sequence);
    `settings`: opts.settings(assets), when the caller made them already; `write_to` (the output
    folder and its temporary folder): the worker writes the still there itself (a local pool)."""
    anim = animation_keys(found.id, int(opts.frames)) if opts.animated else []
    settings = settings or opts.settings(tuple(assets))
    write = {"write": {"out": str(write_to[0]), "tmp": str(write_to[1]),
                       "thumbnail": _thumb_rel(found.id, opts.format)}} if write_to else {}
    return Batch(str(found.path), found.id, digest, opts.sequence, opts.sequence, [opts.time or 0] * (1 + len(anim)),
                 [found.id, *anim], settings=settings, stop_at=str(found.root), kind="thumbnail",
                 params={"format": opts.format, "time": opts.time, **write,
                         **({"animated_frames": int(opts.frames)} if opts.animated else {})})


def inputs_unchanged(inputs: dict[str, str], seen: dict[str, str | None]) -> bool:
    """Whether every asset a thumbnail was drawn from (location -> sha256, as its frame recorded them)
    still has the same bytes: an edited texture makes its models render again."""
    for where, sha in inputs.items():
        if where not in seen:
            try:
                seen[where] = hashlib.sha256(read_source(where)).hexdigest()
            except FormatError:  # gone or unreadable (read_source's one error): changed
                seen[where] = None
        if seen[where] != sha:
            return False
    return True


def _inside(out: Path, rel: str) -> Path | None:
    p = (out / rel).resolve()
    return p if any(p.is_relative_to(out.resolve() / d) for d in ("thumbs", "sheets", DIGEST_FOLDER)) else None


def _entry(found: Found, rec: dict | None) -> dict:
    rec = rec or {}
    e = {k: rec.get(k) for k in ENTRY_KEYS}
    e.update(id=found.id, root=str(found.root), path=found.rel, file=Path(found.rel).name,
             status=rec.get("status") or "failed")
    if e["status"] != "done":
        e.update(thumbnail=None, sidecar=None, image_sha256=None, digest_thumbnail=None, **_NO_ANIMATION)
        e["error"] = rec.get("error") or "not rendered (the run stopped before this model)"
        e["cause"] = rec.get("cause") or ("worker" if not rec else "model")
    else:
        e["cause"] = None
    return e


def make_thumbnails(roots: list[str | Path], out: str | Path, opts: ThumbnailOptions | None = None,
                    broker: str | None = None, workers: int | None = None, progress: bool | None = None,
                    force: bool = False, listfile: str | Path | None = None, retry_failed: bool = False,
                    names: list[str] | None = None, inputs: str | None = None, _runner: str | None = None) -> Summary:
    """Thumbnails of every model under `roots` in `out` (see the module docstring); `listfile` names
    the entries of archives that carry no (listfile) of their own; `names` labels the roots (one
    each, farm.thumbs.find); `inputs` (auto, travel, shared; else FARM_INPUTS) says whether the
    models' inputs travel through the store to the workers (farm.run.inputs; auto: with an s3://
    output)."""
    opts = opts or ThumbnailOptions()
    opts.check()
    if not roots:
        raise ThumbnailError("name at least one folder to look for models in")
    if inputs is not None and inputs not in INPUT_MODES:
        raise ThumbnailError(f"--inputs must be one of {', '.join(INPUT_MODES)}, not {inputs!r}")
    if is_url(out):
        return _into_store(str(out), lambda folder, runner: make_thumbnails(
            roots, folder, opts, broker, workers, progress, force, listfile, retry_failed, names, inputs, runner))
    out = Path(out).absolute()
    out.mkdir(parents=True, exist_ok=True)
    t0 = time.monotonic()
    broker = broker_url(broker, reach=True)
    summary = Summary(out, mode=mode(broker))
    try:
        found = find_models(roots, exclude=[out], errors=summary.listing_errors, listfile=listfile, names=names,
                            follow_links=opts.follow_links)
    except ValueError as e:
        raise ThumbnailError(str(e)) from None
    root_folders = [Path(r).absolute() for r in roots]
    extra_assets = [Path(a).absolute() for a in opts.assets]
    state = ThumbState(out / ".farm")
    state.lock()
    try:
        state.load()
        summary.models = len(found)
        # A local pool's workers write the stills into `out` themselves (the same machine: no image
        # crosses to this process); Celery workers, and confined children (FARM_UNTRUSTED: they write
        # only the store), send them here.
        local_write = broker is None and not untrusted()
        todo, fps = _plan(found, out, opts, state, summary, force, root_folders, extra_assets, retry=retry_failed,
                          write=local_write)
        # Sheet by sheet (a sheet is drawn as soon as its models are done), largest files first
        # within a sheet (the last models to finish are small ones: less idle time at the end).
        sizes = {f.id: f.size for f in found}
        sheets = _SheetWriter(found, out, opts, state, {b.model_rel for b in todo})
        try:
            todo.sort(key=lambda b: (sheets.group_of.get(b.model_rel, 0), -sizes[b.model_rel], b.model_rel))
            if todo:
                runner = open_store(_runner or state.folder)  # the runner's delivery counts, travelling inputs
                _publish(todo, runner, inputs)
                _run(todo, out, opts, state, fps, summary, broker, workers,
                     Progress(len(todo), enabled=progress, desc="thumbnails"), runner, on_recorded=sheets.result)
                todo.clear()  # rendered and recorded: the batches are not held while the index is made
            entries = _finish(found, out, opts, state)
            summary.failed = {e["id"]: e["error"] for e in entries if e["status"] != "done"}
            summary.causes = {e["id"]: e["cause"] or "model" for e in entries if e["status"] != "done"}
            summary.blank = {e["id"]: e["blank"] for e in entries if e["status"] == "done" and e.get("blank")}
            summary.sheets_written = sheets.finish(entries)
        except BaseException:
            sheets.close()
            raise
        doc = _index_doc(opts, root_folders, extra_assets, entries, state)
        labels = root_labels([r.parent if r.is_file() else r for r in root_folders], names)
        write_index(out, doc, state.tmp, title="Thumbnails: " + ", ".join(labels))
        state.compact([f.id for f in found])
        try:
            state.tmp.rmdir()  # empty unless a process was killed mid-write
        except OSError:
            pass
    finally:
        state.unlock()
    summary.seconds = time.monotonic() - t0
    return summary


def _publish(batches: list[Batch], store, inputs: str | None) -> None:
    """With travelling inputs (farm.run.inputs.travels: --inputs travel, or auto with an s3://
    output), every model's inputs go into the store before its batch is sent."""
    try:
        travel = travels(store, inputs)
    except SettingError as e:
        raise ThumbnailError(str(e)) from None
    if travel:
        publish(batches, store)


def _plan(found, out: Path, opts: ThumbnailOptions, state: ThumbState, summary: Summary, force: bool,
          root_folders: list[Path], extra_assets: list[Path], retry: bool = False, write: bool = False
          ) -> tuple[list[Batch], dict[str, str]]:
    """The batches of the models to render (not skipped as up to date, nor as failed for their own
    reason with nothing changed since, unless `retry`; a model that cannot be read is recorded
    failed here: cause "input" for a file the system would not read, "model" for an archive entry that
    cannot be opened (its name, its archive's bytes: farm.thumbs.work.failure_cause's rule)) and every
    model's options fingerprint. `write`: the workers write the stills into `out` themselves."""
    todo: list[Batch] = []
    write_to = (out, state.tmp) if write else None
    fps: dict[str, str] = {}
    seen: dict[str, str | None] = {}  # asset location -> its sha256 now (each shared texture hashed once)
    made: dict[tuple, RenderSettings] = {}  # asset roots -> the settings (checked once, not once a model)
    folders: dict[tuple, tuple[list[str], str]] = {}  # (folder, root) -> its models' asset roots and fingerprint
    for f in found:
        where = (str(f.path.parent), str(f.root))  # what asset_roots_for depends on, with the roots and options
        if where not in folders:
            assets = asset_roots_for(f, root_folders, extra_assets)
            folders[where] = assets, fingerprint({**_render_options(opts, assets), **_animation_options(opts)})
        assets, fp = folders[where]
        fps[f.id] = fp
        try:
            digest = model_digest(str(f.path))
        except (OSError, FormatError) as e:  # a file: OSError; an archive entry: FormatError (read_source)
            own = isinstance(e, FormatError)
            error = str(e) if own else f"{f.path}: cannot read: {e.strerror or e}"
            state.record(f.id, {"status": "failed", "error": error, "options": fp, "sha256": None,
                                "cause": "model" if own else "input"})
            summary.rendered.append(f.id)
            continue
        rec = state.records.get(f.id)
        same = (rec and rec.get("sha256") == digest and rec.get("options") == fp
                and inputs_unchanged(rec.get("inputs") or {}, seen))
        if not force and same and rec.get("status") == "done" and rec.get("thumbnail") \
                and (out / rec["thumbnail"]).is_file() \
                and (not rec.get("animation") or (out / rec["animation"]).is_file()):
            summary.skipped += 1
            continue
        if not retry and same and rec.get("status") == "failed" and rec.get("cause") == "model":
            summary.kept_failed += 1  # the same bytes, settings and inputs fail the same way
            continue
        key = tuple(assets)
        if key not in made:
            made[key] = opts.settings(key)
        todo.append(_batch(f, digest, opts, assets, made[key], write_to))
    return todo, fps


def _index_doc(opts: ThumbnailOptions, root_folders: list[Path], extra_assets: list[Path], entries: list[dict],
               state: ThumbState) -> dict:
    """index.json: the options, the counts, the sheets and every model's entry."""
    return {"format": FORMAT, "options": {"size": int(opts.size), "sequence": opts.sequence, "time": opts.time,
                                          "camera": opts.render.camera, "format": opts.format,
                                          "team": opts.render.team, "msaa": opts.render.msaa,
                                          "missing_textures": opts.render.missing_textures,
                                          "sheet": int(opts.sheet),
                                          "roots": [str(r) for r in root_folders],
                                          "assets": [str(a) for a in extra_assets], **_animation_options(opts)},
            "counts": {"models": len(entries), "done": sum(e["status"] == "done" for e in entries),
                       "failed": sum(e["status"] != "done" for e in entries)},
            "sheets": sorted(state.sheets), "models": entries}


def _into_store(url: str, make) -> Summary:
    """`-o s3://BUCKET/PREFIX`: the output folder kept as objects under that prefix. Its files are
    copied into a temporary folder, `make(folder, runner)` renders into it as into any output folder
    (same incremental state), and what changed goes back: thumbnails and sheets first, then the state and
    the index; files gone are deleted. A lock object keeps two runs from writing one prefix. The
    runner's store is PREFIX/.farm itself (`runner`): workers that see only the bucket count their
    deliveries there and fetch the travelling inputs (farm.run.inputs) from it; neither is copied."""
    mirror = TreeMirror(open_store(url))

    def skip(rel: str) -> bool:
        return rel == TreeMirror.LOCK or rel.startswith((".farm/tmp/", ".farm/jobs/", ".farm/inputs/"))

    mirror.hold()
    try:
        with tempfile.TemporaryDirectory(prefix="farm-thumbs-") as tmp:
            mirror.pull(Path(tmp), skip)
            summary = make(Path(tmp), f"{url.rstrip('/')}/.farm")
            mirror.push(Path(tmp), skip, last=(".farm/state.json", "index.json", "index.html"))
    finally:
        mirror.release()
    summary.shown = f"{url.rstrip('/')}/index.html"
    return summary


def _run(batches: list[Batch], out: Path, opts: ThumbnailOptions, state: ThumbState, fps: dict[str, str],
         summary: Summary, broker: str | None, workers: int | None, bar, store, on_recorded=None) -> None:
    """Render the batches; each result is written and recorded, then `on_recorded(model_id)`."""
    job_id = f"thumbnails-{secrets.token_hex(4)}"
    digests = {b.model_rel: b.model_digest for b in batches}
    thumbs = {b.model_rel: b.params["write"]["thumbnail"] for b in batches if b.params.get("write")}  # planned

    def on_result(result: BatchResult) -> None:
        model_id = result.frames[0].key
        rec = _write_result(result, out, opts, state, fps.get(model_id), digests.get(model_id),
                            thumbs.get(model_id))
        state.record(model_id, rec)  # after the image: a journal line never names a missing file
        summary.rendered.append(model_id)
        if rec["status"] == "done" and (rec.get("missing") or rec.get("diagnostic_count")):
            summary.warnings[model_id] = [rec.get("missing") or [], rec.get("diagnostics") or [],
                                          int(rec.get("diagnostic_count") or 0)]
        bar.finish(result.batch, 1, int(rec["status"] != "done"))
        if on_recorded is not None:
            on_recorded(model_id)

    try:
        run_batches(job_id, batches, store, broker=broker, workers=workers, on_result=on_result, progress=bar,
                    group=True)
    finally:
        bar.close()
        store.remove_job(job_id)


def _write_result(result: BatchResult, out: Path, opts: ThumbnailOptions, state: ThumbState, fp: str | None,
                  digest: str | None, thumb: str | None = None) -> dict:
    """A model's result written (its image, sidecar, digest-keyed copy, animation) and its record;
    `thumb`: where its still goes (`_thumb_rel`), when the batch already says.
    A runner's own verdict (a lost worker, a store error: no facts from a worker) is cause "worker"."""
    frame = result.frames[0]
    model_id = frame.key
    info = dict(frame.info or {})
    image = info.pop("image", None)
    rec = {k: info.get(k) for k in ENTRY_KEYS if k in info}
    rec.update(sha256=info.get("sha256") or digest, options=fp,
               inputs={a["found"]: a["sha256"] for a in info.get("assets") or () if a.get("found") and a.get("sha256")})
    trace = info.get("trace") or {}
    thumb = thumb or _thumb_rel(model_id, opts.format)
    image_digest = _thumbnail_in_place(frame, image, info.pop("written", None), out / thumb, state.tmp)
    if image_digest is not None:
        keyed = f"{DIGEST_FOLDER}/{rec['sha256']}-{fp}.{opts.format}" if rec["sha256"] and fp else None
        if keyed:
            _same_bytes(os.path.join(out, thumb), os.path.join(out, keyed), state.tmp)
        sidecar = None
        if opts.format != "png":
            sidecar = thumb + ".json"
            atomic_write_json(out / sidecar, image_sidecar(trace, info.get("diagnostics", []),
                                                           info.get("diagnostic_count", 0)), state.tmp)
        camera = trace.get("camera") if isinstance(trace.get("camera"), dict) else {}
        rec.update(status="done", error=None, cause=None, thumbnail=thumb, sidecar=sidecar, image_sha256=image_digest,
                   digest_thumbnail=keyed, camera_source=camera.get("source"))
    else:
        rec.update(status="failed", error=frame.error or "failed without a reason", thumbnail=None, sidecar=None,
                   image_sha256=None, digest_thumbnail=None,
                   cause=frame.info.get("cause") if frame.info else "worker")
    rec.update(_write_animation(result, out, opts, state) if rec["status"] == "done" else _NO_ANIMATION)
    return rec


def _thumbnail_in_place(frame, image: str | None, written: str | None, path: Path, tmp: Path) -> str | None:
    """The sha256 of a model's thumbnail, now at `path`: the image that came (base64), written here,
    or the one a local worker wrote there itself (`written`: the worker hashed it, on this machine);
    None when none came, or it came damaged (the frame then fails, cause "worker")."""
    if frame.status != "done" or (image is None and not written):
        return None
    if image is None:
        return frame.digest
    data = base64.b64decode(image)
    digest = hashlib.sha256(data).hexdigest()
    if frame.digest and digest != frame.digest:
        frame.status, frame.error = "failed", f"{frame.key}: the image arrived damaged (sha256 mismatch)"
        frame.info = {**(frame.info or {}), "cause": "worker"}
        return None
    atomic_write(path, data, tmp)
    return digest


def _same_bytes(written: str, path: str, tmp: Path) -> None:
    """`path` given the bytes of `written`: a hard link to it, put in place as atomic_write puts a
    file (no second file written: a thumbnail's digest-keyed copy), else a copy of the bytes."""
    link = None
    try:
        try:
            os.link(written, path)  # not there yet (a fresh name): the link is made whole or not at all
        except FileNotFoundError:  # its folder is not there yet (or `written` is gone: the copy below says so)
            os.makedirs(os.path.dirname(path), exist_ok=True)
            os.link(written, path)
        except FileExistsError:
            link = os.path.join(tmp, f".{os.path.basename(path)[:40]}.{os.getpid()}.{secrets.token_hex(4)}.tmp")
            os.link(written, link)
            os.replace(link, path)
    except OSError:  # no hard links here (or another file system): the bytes, written again
        if link is not None:
            Path(link).unlink(missing_ok=True)
        atomic_write(path, Path(written).read_bytes(), tmp)


_NO_ANIMATION = {"animation": None, "animation_sidecar": None, "animation_sha256": None}


def _write_animation(result: BatchResult, out: Path, opts: ThumbnailOptions, state: ThumbState) -> dict:
    """A model's animation (--animated) written next to its still, thumbs/<id>.anim.<format> and its
    sidecar (farm.images.animation_sidecar); the record's animation keys, null when none came (not
    asked, a model with no sequence to animate, a frame that failed, damaged bytes)."""
    last = next((f for f in result.frames[1:] if f.status == "done" and f.info and "animation" in f.info), None)
    if not opts.animated or last is None:
        return dict(_NO_ANIMATION)
    info = last.info
    data = base64.b64decode(info["animation"])
    digest = hashlib.sha256(data).hexdigest()
    if digest != last.digest:
        return dict(_NO_ANIMATION)
    rel = _thumb_rel(result.frames[0].key, f"anim.{opts.format}")
    atomic_write(out / rel, data, state.tmp)
    atomic_write_json(out / (rel + ".json"), info["animation_sidecar"], state.tmp)
    return {"animation": rel, "animation_sidecar": rel + ".json", "animation_sha256": digest}


def _finish(found: list[Found], out: Path, opts: ThumbnailOptions, state: ThumbState) -> list[dict]:
    """Index entries for the models found; removes the files of models gone or failing now."""
    entries = [_entry(f, state.records.get(f.id)) for f in found]
    wanted = {e[k] for e in entries for k in FILE_KEYS if e.get(k)}
    for rel in sorted(state.files - wanted):
        p = _inside(out, rel)
        if p is not None:
            p.unlink(missing_ok=True)
    state.files = set(wanted)
    _prune_empty(out / "thumbs")
    return entries


def _prune_empty(folder: Path) -> None:
    """Remove the empty folders under `folder` (deepest first: one emptied by that is removed too)."""
    for dirpath, _, filenames in os.walk(folder, topdown=False):
        if dirpath != str(folder) and not filenames:
            try:
                os.rmdir(dirpath)
            except OSError:  # not empty after all (a folder left in it)
                pass


class _SheetWriter:
    """Contact sheets drawn while the pool renders. A sheet is drawn as soon as every model on it
    has its result, in a thread (Pillow releases the GIL while it composites, draws text and
    encodes), so sheets overlap the rendering of later models instead of all following it (they
    cost about 8 ms a model, a fifth of a thumbnail). A sheet's bytes depend on its entries only, so
    the order of drawing does not matter; a sheet whose entries did not change is not drawn again."""

    def __init__(self, found: list[Found], out: Path, opts: ThumbnailOptions, state: ThumbState, pending: set[str]):
        n = int(opts.sheet)
        self.n, self.out, self.opts, self.state = n, out, opts, state
        self.groups = [found[i:i + n] for i in range(0, len(found), n)] if n else []
        self.group_of = {f.id: gi for gi, group in enumerate(self.groups) for f in group}
        self.waiting = [sum(f.id in pending for f in group) for group in self.groups]
        self.wanted: dict[str, str] = {}  # sheet name -> fingerprint, for the groups submitted
        self.futures: list = []
        self.pool = ThreadPoolExecutor(max_workers=available_cores(), thread_name_prefix="farm-sheet")
        for gi, waiting in enumerate(self.waiting):
            if not waiting:
                self._submit(gi)

    def name(self, gi: int) -> str:
        return f"sheets/sheet-{gi + 1:04d}.{self.opts.format}"

    def result(self, model_id: str) -> None:
        """A model's result is recorded: draw its sheet when it was the last one missing."""
        gi = self.group_of.get(model_id)
        if gi is None or self.waiting[gi] <= 0:
            return
        self.waiting[gi] -= 1
        if self.waiting[gi] == 0:
            self._submit(gi)

    def _submit(self, gi: int) -> None:
        name, n, opts, state = self.name(gi), self.n, self.opts, self.state
        entries = [_entry(f, state.records.get(f.id)) for f in self.groups[gi]]
        body = [SHEET_VERSION, n, int(opts.size), opts.format,
                [[e["id"], e["status"], e["image_sha256"], e["error"], e["sequence"]] for e in entries]]
        fp = hashlib.sha256(json.dumps(body, sort_keys=True).encode("utf-8")).hexdigest()[:24]
        self.wanted[name] = fp
        if state.sheets.get(name) == fp and (self.out / name).is_file():
            return

        def draw() -> None:
            image = draw_sheet(entries, self.out, n, int(opts.size))
            atomic_write(self.out / name, sheet_bytes(image, opts.format), state.tmp)

        self.futures.append(self.pool.submit(draw))

    def finish(self, entries: list[dict]) -> int:
        """Draw the sheets still missing (models whose results never came), wait for all, name each
        entry's sheet, remove the sheets of groups that are gone; returns how many were drawn."""
        for gi in range(len(self.groups)):
            if self.name(gi) not in self.wanted:
                self._submit(gi)
        try:
            for future in self.futures:
                future.result()
        finally:
            self.pool.shutdown(wait=True)
        if self.n:
            for i, e in enumerate(entries):
                e["sheet"] = self.name(i // self.n)
        for name in set(self.state.sheets) - set(self.wanted):
            p = _inside(self.out, name)
            if p is not None:
                p.unlink(missing_ok=True)
        self.state.sheets = dict(self.wanted)
        return len(self.futures)

    def close(self) -> None:
        """Stop drawing (the run failed): drop the sheets not started."""
        self.pool.shutdown(wait=True, cancel_futures=True)
