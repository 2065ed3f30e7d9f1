"""`Renderer.render(model, FrameSpec) -> Frame`: the one public entry for drawing a frame.

A frame is a pure function of its trace: the model's content hash, sequence, time, camera, size,
MSAA, team colour, background, the lighting rule, the render rules (`renderer.rules.RENDER_RULE`),
this renderer's version and the GL environment. Everything that
decides the pixels goes into `Frame.trace`; nothing else (wall time, order, process) may.
"""

from __future__ import annotations

import functools
import hashlib
import re
from dataclasses import dataclass, field, fields, replace
from pathlib import Path

import numpy as np

from renderer.anim import TIME_RULE, find_sequence
from renderer.anim.tracks import check_time
from renderer.assets.search import split_source
from renderer.assets.sources import read_source
from renderer.camera import FIT_CAMERA, FIT_RULE, Camera, fit_camera, resolve_camera
from renderer.context import ModelContext
from renderer.errors import Diagnostic, FormatError
from renderer.formats import context_of
from renderer.framing import drawn_points
from renderer.fx import FX_RULE, Effects
from renderer.model import Model
from renderer.rules import (
    DEFAULT_LIGHTING,
    LIGHT_RULE,
    MAX_MODEL_LIGHTS,
    RENDER_RULE,
    check_events,
    check_lights,
    lighting_rule,
)
from renderer.texture_set import DEFAULT_MISSING_TEXTURES, TextureSettings

RENDERER_VERSION = "0.2"  # 0.2: the viewer's lighting rule by default, stored mip levels, HD slots, GEOA colour order


@dataclass(frozen=True)
class FrameSpec:
    sequence: int | str | None = None  # index or name; None = the first sequence (rest pose if none)
    time_ms: int = 0  # from the sequence start
    width: int = 512
    height: int = 512
    camera: str = "auto"  # auto | fit | CAMS name | ex,ey,ez:tx,ty,tz[:ux,uy,uz[:fov]] (renderer.camera)
    team: int = 0
    msaa: int = 0
    background: str = "transparent"  # transparent | #rrggbb
    assets: tuple = ()  # asset roots, searched in order: folders or MPQ archives
    missing_textures: str = DEFAULT_MISSING_TEXTURES  # renderer.texture_set.MISSING_MODES: the placeholder drawn
    game: tuple = ()  # game data: a game folder, or archives (searched patch first) / extracted folders
    stop_at: str | None = None  # the asset / job root holding the model: the search goes no higher
    instance_seed: int = 0  # seeds this model instance's particle emitters (renderer.fx.rng)
    lighting: str = DEFAULT_LIGHTING  # a name in renderer.rules.LIGHTING_RULES
    lights: str = "off"  # off | model: the model's LITE lights shade it too (renderer.rules, "Model lights")
    wireframe: bool = False  # geosets as lines (glPolygonMode LINE; effects stay filled); farm view's w
    events: str = "off"  # off | model: EVTS event visuals (renderer.fx.events; renderer.rules.EVENTS_MODES)
    background_alpha: int = 255  # the opacity of a #rrggbb background, 0-255 (transparent stays 0)
    follow_links: bool = False  # assets through links out of the searched folders are read, not refused

    def __post_init__(self):
        lighting_rule(self.lighting)  # fail early on an unknown rule name
        check_lights(self.lights)
        check_events(self.events)
        check_time(self.time_ms)  # 0 .. renderer.anim.tracks.MAX_TIME_MS, finite

    def background_rgba(self) -> tuple[float, float, float, float]:
        return _background_rgba(self.background, self.background_alpha)


@functools.lru_cache(maxsize=64)
def _background_rgba(background: str, alpha: int) -> tuple[float, float, float, float]:
    """A FrameSpec's clear colour (read once per background, not once per frame)."""
    if background == "transparent":
        return (0.0, 0.0, 0.0, 0.0)
    m = re.fullmatch(r"#?([0-9a-fA-F]{6})", background)
    if not m:
        raise ValueError(f"background must be 'transparent' or '#rrggbb', got {background!r}")
    v = int(m.group(1), 16)
    return ((v >> 16 & 255) / 255, (v >> 8 & 255) / 255, (v & 255) / 255, alpha / 255)


@dataclass
class Frame:
    rgba: np.ndarray
    trace: dict
    diagnostics: list[Diagnostic] = field(default_factory=list)
    # Every asset lookup of the model (renderer.assets.search): found ones with where and sha256,
    # missing ones with where the search looked. JSON-ready, for sidecars.
    assets: list[dict] = field(default_factory=list)

    @property
    def missing_assets(self) -> list[dict]:
        return [a for a in self.assets if a.get("missing")]


def model_hash(model: Model, context: ModelContext | None = None) -> str:
    """sha256 of the model file's bytes: the digest its loader recorded in its context, else its
    file's or archive entry's (`model.path`), else that of its MDX serialisation (no file)."""
    if context is not None and context.location.digest:
        return context.location.digest
    if model.path and Path(model.path).is_file():
        return hashlib.sha256(Path(model.path).read_bytes()).hexdigest()
    if model.path and split_source(model.path) is not None:
        try:
            return hashlib.sha256(read_source(model.path)).hexdigest()
        except (OSError, FormatError, ValueError):  # gone since it was read: hashed as a model without a file
            pass
    # the MDX writer, only to hash a model that has no file
    from renderer.formats.mdx import write_mdx

    return hashlib.sha256(write_mdx(model)).hexdigest()


def resolve_sequence(model: Model, sequence: int | str | None) -> int | None:
    """The sequence index a FrameSpec means: None is the first sequence, or no sequence at all."""
    if sequence is None:
        return 0 if model.sequences else None
    return find_sequence(model, sequence)


def texture_settings(spec: FrameSpec, assets=(), game=(), stop_at=None) -> TextureSettings:
    """What a frame's textures depend on besides the model: the asset roots it searches (the spec's,
    then `assets`), its game data and stop root (the spec's, else `game` and `stop_at`), its team and
    its missing-texture mode."""
    roots = tuple(dict.fromkeys(str(a) for a in (*spec.assets, *assets)))
    own = spec.game if isinstance(spec.game, (list, tuple)) else (spec.game,) if spec.game else ()
    data = tuple(str(g) for g in (own or game))
    stop = spec.stop_at if spec.stop_at is not None else stop_at
    return TextureSettings(roots, spec.team, spec.missing_textures, data, None if stop is None else str(stop),
                           bool(spec.follow_links))


class Renderer:
    """Owns one GL context (created lazily, in the calling process) and per-model GPU resources."""

    def __init__(self, backend: str = "auto", assets=(), game=(), stop_at=None):
        """`assets`, `game`, `stop_at`: defaults for every frame (a FrameSpec's own asset roots come
        first; its game data and stop root, when given, replace these)."""
        self.backend = backend
        self.assets = tuple(assets)
        self.game = tuple(game) if isinstance(game, (list, tuple)) else (game,) if game else ()
        self.stop_at = stop_at
        self._frames = None  # renderer.gl.inflight.InFlight: the framebuffers of the frames in flight
        self._ctx = None
        self._program = None
        self._palette = None
        self._models: dict[int, object] = {}
        self._memos: dict[int, _Memo] = {}  # id(model) -> what its frames share (_Memo)
        self._gl_info: dict | None = None
        self._textures: dict[tuple, TextureSettings] = {}  # Renderer.texture_settings by the spec fields it reads
        self._fx_programs = None
        self._ahead: _Ahead | None = None  # the next frame, posed and issued by render(then=...)
        self.effects = Effects()  # particle/ribbon simulations kept between frames (renderer.fx)

    @property
    def context(self):
        if self._ctx is None:
            # GL side: imported when a frame is drawn (`import renderer` stays light)
            from renderer.gl import create_context

            self._ctx = create_context(self.backend)
            self._ctx.make_current()
        return self._ctx

    def gl_info(self) -> dict:
        if self._gl_info is None:  # fixed for the context's life; read into every trace
            self._gl_info = self.context.info.as_dict()
        return dict(self._gl_info)

    def _gpu(self, model: Model, spec: FrameSpec):
        # GL side: imported when a frame is drawn (`import renderer` stays light)
        from renderer.scene import ModelGPU

        textures = self.texture_settings(spec)
        key = (id(model), textures)
        gpu = self._models.get(key)
        if gpu is None or gpu.model is not model:
            if gpu is not None:
                gpu.delete()
            gpu = ModelGPU(model, textures, self._memo(model).context)
            self._models[key] = gpu
        return gpu

    def texture_settings(self, spec: FrameSpec) -> TextureSettings:
        """What a frame's textures depend on besides the model (`texture_settings`, with this renderer's
        asset roots, game data and stop root as the defaults), made once per such spec fields."""
        key = (spec.assets, spec.game, spec.stop_at, spec.team, spec.missing_textures, spec.follow_links)
        try:
            found = self._textures.get(key)
        except TypeError:  # a list given where a tuple belongs: not kept
            return texture_settings(spec, self.assets, self.game, self.stop_at)
        if found is None:
            if len(self._textures) >= _MAX_TRACES:
                self._textures.clear()
            found = self._textures[key] = texture_settings(spec, self.assets, self.game, self.stop_at)
        return found

    def forget(self, model: Model) -> None:
        """Free the GPU resources of a model (call when a batch moves on to another model)."""
        self._drop_ahead()
        for key in [k for k in self._models if k[0] == id(model)]:
            self._models.pop(key).delete()
        self._memos.pop(id(model), None)
        self.effects.forget(model)

    def _memo(self, model: Model) -> _Memo:
        memo = self._memos.get(id(model))
        if memo is None or memo.model is not model:
            memo = self._memos[id(model)] = _Memo(model, context_of(model))
        return memo

    def _adopt(self, model: Model, context: ModelContext | None) -> None:
        """Draw `model` in `context` (None: the one it is drawn in, else the one its path names,
        renderer.formats.context_of); a model drawn before in another context starts afresh."""
        memo = self._memos.get(id(model))
        if memo is not None and memo.model is model and (context is None or context == memo.context):
            return
        if memo is not None and memo.model is model:
            self.forget(model)
        self._memos[id(model)] = _Memo(model, context_of(model) if context is None else context)

    def _digest(self, model: Model, given: str | None) -> str:
        """The model's content hash, computed once per model object (it is read on every frame)."""
        if given:
            return given
        memo = self._memo(model)
        if memo.digest is None:
            memo.digest = model_hash(model, memo.context)
        return memo.digest

    def _camera(self, model: Model, spec: FrameSpec, seq: int | None, aspect: float) -> Camera:
        """The auto, CAMS or explicit camera of a frame (for ``fit``: the auto camera it starts from),
        resolved once per model, camera, sequence and aspect: it does not depend on the time."""
        cameras = self._memo(model).cameras
        key = (spec.camera, seq, aspect)
        camera = cameras.get(key)
        if camera is None:
            camera = cameras[key] = resolve_camera(spec.camera, model, seq, aspect)
        return camera

    def _pose(self, model: Model, spec: FrameSpec, digest: str | None = None):
        """(sequence index, camera, GPU resources, pose, effects) of a frame; the context is made current.
        The effects (None when the model has none, or when `digest` is None: not asked for) are the
        simulation at the frame's time, seen from its camera. The ``fit`` camera poses and simulates
        once from the auto camera to find what is drawn (renderer.framing), then again from the camera
        that frames it (billboards and view-dependent emitters face the camera that draws them)."""
        self.context.make_current()
        seq = resolve_sequence(model, spec.sequence)
        gpu = self._gpu(model, spec)
        aspect = spec.width / spec.height
        camera = self._camera(model, spec, seq, aspect)
        first = None
        if spec.camera == FIT_CAMERA:
            first = gpu.animator.pose(seq, spec.time_ms, camera.view())
            fx = self._effects(model, gpu, seq, spec, digest or self._digest(model, None), camera)
            fitted = fit_camera(drawn_points(model, first, fx, camera.view()), aspect, camera)
            if fitted is camera:  # nothing drawn: the auto camera's pose and effects are the frame's
                return seq, camera, gpu, first, (fx if digest else None)
            camera = fitted
        if first is not None and not gpu.animator.skeleton.track_rotation:
            pose = first  # no billboard or camera-anchored node: the view changes nothing in the pose
        else:
            pose = gpu.animator.pose(seq, spec.time_ms, camera.view())
        return seq, camera, gpu, pose, self._effects(model, gpu, seq, spec, digest, camera) if digest else None

    def _effects(self, model: Model, gpu, seq: int | None, spec: FrameSpec, digest: str, camera: Camera):
        return self.effects.at(model, gpu.animator, seq, spec.time_ms, spec.instance_seed, digest, camera.view())

    def reset_effects(self) -> None:
        """Drop every running particle/ribbon simulation: the next frame simulates from t = 0."""
        self._drop_ahead()
        self.effects.reset()

    def render(self, model: Model, spec: FrameSpec, model_digest: str | None = None, *,
               then: FrameSpec | None = None, context: ModelContext | None = None) -> Frame:
        """Draw and read back one frame of `model` in `context` (where it came from and how its
        inputs are found, renderer.context: what `renderer.formats.load` returned with it; None: the
        one it was last drawn in, else the one its path names, renderer.formats.context_of). `then`:
        the frame the caller asks for next (same model and digest; a batch's next time). Every frame's
        read-back is asynchronous (a pixel buffer object and a fence: Framebuffer.start_read), so
        `then` is posed and issued into a second framebuffer while this frame rasterises (llvmpipe's
        threads work from the flush on), and only then is this frame's fence waited on: two frames in
        flight (renderer.gl.inflight), and the caller's own work on this frame (encoding, storing)
        overlaps the next frame's rasterising; the call `render(model, then, model_digest)` that
        follows only reads it back. The bytes are those of a frame rendered alone
        (tests/test_pipeline.py). An exception while preparing `then` is raised by that next call; a
        next call for another frame drops what was prepared; this frame failing does not."""
        self._adopt(model, context)
        ahead, self._ahead = self._ahead, None
        if ahead is not None and ahead.serves(model, spec, model_digest):
            if ahead.error is not None:
                raise ahead.error
            drawn = ahead.drawn
        else:
            _cancel(ahead)
            drawn = self._issue(self._prepare(model, spec, model_digest))
        posed = None if then is None else _Ahead.attempt(
            model, then, model_digest, lambda: self._issue(self._prepare(model, then, model_digest)))
        self._ahead = posed  # kept if this frame fails to read back: the next one is in its own framebuffer
        return self._finish(drawn)

    def _drop_ahead(self) -> None:
        """Forget the frame prepared for the next call (its read-back in flight too)."""
        ahead, self._ahead = self._ahead, None
        _cancel(ahead)

    def _prepare(self, model: Model, spec: FrameSpec, model_digest: str | None) -> _Drawn:
        """Everything of a frame that is not GL drawing: pose, effects, camera, lights (the CPU part)."""
        # Effects: the content hash seeds the emitters, so it is known before posing.
        digest = self._digest(model, model_digest)
        seq, camera, gpu, pose, fx = self._pose(model, spec, digest)
        lights, notes = self._lights(model, spec, pose)
        return _Drawn(model, spec, digest, seq, camera, gpu, pose, fx, lights, notes)

    def _issue(self, d: _Drawn) -> _Drawn:
        """Clear and issue the frame's draws, then start its read-back (Framebuffer.start_read, which
        flushes): llvmpipe rasterises and reads it back while the caller goes on."""
        # GL side: imported when a frame is drawn (`import renderer` stays light)
        from renderer.gl.model_program import ModelProgram
        from renderer.gl.resources import PaletteBuffer
        from renderer.scene import FrameDraw, draw_model

        spec = d.spec
        if self._program is None:
            self._program = ModelProgram()
            self._palette = PaletteBuffer()
        draw = FrameDraw(d.camera, spec.width / spec.height, self._program, self._palette, spec, d.lights)
        fb = self._framebuffer(spec.width, spec.height, spec.msaa)
        try:
            fb.clear(spec.background_rgba())
            if spec.wireframe:
                _polygon_mode(True)
            try:
                draw_model(d.gpu, d.pose, draw)
            finally:
                if spec.wireframe:
                    _polygon_mode(False)
            if d.fx is not None:
                d.stats = self._draw_effects(d.fx, d.gpu, d.pose, draw)
            if spec.events == "model" and d.model.event_objects:
                self._draw_events(d.gpu, d.pose, draw)
            fb.start_read()
        except BaseException:  # a frame that failed half-way: the next one starts on a fresh framebuffer
            self._frames.drop(fb)
            raise
        d.fb = fb
        return d

    def _finish(self, d: _Drawn) -> Frame:
        """Read the issued frame back; its trace, diagnostics and asset records."""
        try:
            if d.fb.deleted or not d.fb.reading:
                raise RuntimeError("the frame's framebuffer was replaced before it was read back")
            rgba = d.fb.finish_read()
        except BaseException:
            self._frames.drop(d.fb)
            raise
        if d.stats is not None:
            self.effects.last_stats = d.stats
        trace = self.trace(d.model, d.spec, d.seq, d.camera, d.fb.granted_samples, d.digest)
        record = [dict(a) for a in d.gpu.search.record] if d.gpu.search is not None else []
        return Frame(rgba, trace, list(d.gpu.diagnostics) + d.notes, record)

    @staticmethod
    def _lights(model: Model, spec: FrameSpec, pose):
        """(FrameLights or None, diagnostics) of a frame: None unless the spec asks for model lights."""
        if spec.lights != "model":
            return None, []
        # only for FrameSpec(lights="model")
        from renderer.lights import frame_lights

        lights = frame_lights(model, pose)
        notes = []
        if lights.dropped:
            notes.append(Diagnostic("lights", None, f"{len(model.lights)} lights, only the first {MAX_MODEL_LIGHTS}"
                                    f" shade the model; dropped: {', '.join(lights.dropped)}"))
        return lights, notes

    def _framebuffer(self, width: int, height: int, samples: int):
        """A framebuffer of this size and MSAA with no read-back in flight (renderer.gl.inflight: a batch
        of frames of one size allocates its two framebuffers once; every frame clears all of it)."""
        if self._frames is None:
            # GL side: imported when a frame is drawn (`import renderer` stays light)
            from renderer.gl.inflight import InFlight

            self._frames = InFlight()
        return self._frames.get(width, height, samples)

    def _with_effect_programs(self, draw):
        """`draw` with the effects' GL programs (made on the first frame that has effects or events)."""
        # GL side: imported when a frame is drawn (`import renderer` stays light)
        from renderer.gl.particles import EffectPrograms

        if self._fx_programs is None:
            self._fx_programs = EffectPrograms()
        return replace(draw, effects=self._fx_programs)

    def _draw_events(self, gpu, pose, draw):
        # GL side: imported when a frame is drawn (`import renderer` stays light)
        from renderer.fx.draw import EffectResources
        from renderer.fx.events import draw_events

        return draw_events(gpu, pose, self._with_effect_programs(draw), EffectResources.of(gpu, draw.spec))

    def _draw_effects(self, fx, gpu, pose, draw) -> dict:
        # GL side: imported when a frame is drawn (`import renderer` stays light)
        from renderer.fx.draw import draw_effects

        return draw_effects(fx, gpu, pose, self._with_effect_programs(draw))

    def skinned_vertices(self, model: Model, spec: FrameSpec, context: ModelContext | None = None
                         ) -> list[tuple[np.ndarray, np.ndarray] | None]:
        """Per geoset, the (positions, normals) the GPU skinning produces for this frame's pose,
        read back with transform feedback (None for geosets with nothing to draw); `context` as for
        `render`."""
        # GL side: imported when a frame is drawn (`import renderer` stays light)
        from renderer.gl.feedback import SkinFeedback
        from renderer.gl.framebuffer import Framebuffer
        from renderer.gl.resources import PaletteBuffer
        from renderer.scene import upload_palettes

        self._adopt(model, context)
        _, _, gpu, pose, _ = self._pose(model, spec)
        if self._palette is None:
            self._palette = PaletteBuffer()
        offsets = upload_palettes(pose, self._palette)

        target = Framebuffer(1, 1)  # drawing needs a complete framebuffer, even with rasterising off
        feedback = SkinFeedback()
        try:
            target.bind()
            return [None if buf is None else feedback.run(buf, self._palette.texture, offsets[gi])
                    for gi, buf in enumerate(gpu.geosets)]
        finally:
            feedback.delete()
            target.delete()

    def trace(self, model: Model, spec: FrameSpec, seq: int | None, camera: Camera, msaa: int,
              model_digest: str | None) -> dict:
        """The frame's trace: built once per model, settings, sequence, camera and granted MSAA (every
        part but the time), which is then set (a batch's frames differ in their time alone)."""
        traces = self._memo(model).traces
        key = (_but_time(spec), seq, camera, msaa, model_digest)
        found = traces.get(key)
        if found is None:
            if len(traces) >= _MAX_TRACES:  # fit cameras differ frame by frame: keep the memo bounded
                traces.clear()
            constant = self._trace(model, spec, seq, camera, msaa, model_digest)
            found = traces[key] = (constant, tuple(k for k, v in constant.items() if isinstance(v, (dict, list))))
        constant, containers = found
        trace = dict(constant)  # the same keys in the same order, the time set in its place
        for k in containers:
            trace[k] = _fresh(constant[k])
        trace["time_ms"] = int(spec.time_ms)
        return trace

    def _trace(self, model: Model, spec: FrameSpec, seq: int | None, camera: Camera, msaa: int,
               model_digest: str | None) -> dict:
        return {
            "renderer_version": RENDERER_VERSION,
            "model": Path(model.path).name if model.path else str(model.name),
            "model_hash": self._digest(model, model_digest),
            "sequence": None if seq is None else str(model.sequences[seq].name),
            "sequence_index": seq,
            "time_ms": int(spec.time_ms),
            "time_rule": TIME_RULE,
            "camera": camera.as_dict(),
            "size": [spec.width, spec.height],
            "msaa_requested": spec.msaa,
            "msaa": msaa,
            "team": spec.team,
            "background": spec.background,
            "missing_textures": spec.missing_textures,
            "instance_seed": int(spec.instance_seed),
            "fx_rule": FX_RULE,
            "lighting": lighting_rule(spec.lighting).describe(),
            "render_rule": RENDER_RULE,
            "gl": self.gl_info(),
        } | ({} if spec.lights == "off" else {"lights": f"{spec.lights}: {LIGHT_RULE}"}) | (  # keys only when on:
            {"wireframe": True} if spec.wireframe else {}) | (  # frames without them are as before
            {"events": "model"} if spec.events != "off" else {}) | (
            {"background_alpha": spec.background_alpha} if spec.background_alpha != 255 else {}) | (
            {"camera_rule": FIT_RULE} if spec.camera == FIT_CAMERA else {})

    def __enter__(self) -> Renderer:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        self._drop_ahead()
        if self._frames is not None:
            self._frames.close()
            self._frames = None
        for gpu in self._models.values():
            gpu.delete()
        self._models.clear()
        if self._program is not None:
            self._program.delete()
            self._program = None
        if self._palette is not None:
            self._palette.delete()
            self._palette = None
        if self._fx_programs is not None:
            self._fx_programs.delete()
            self._fx_programs = None
        self.effects.reset()
        if self._ctx is not None:
            self._ctx.release()
            self._ctx = None
        self._gl_info = None  # a later frame makes a new context, which answers for itself
        self._memos.clear()


_MAX_TRACES = 64  # trace memo entries per model
_SPEC_FIELDS = tuple(f.name for f in fields(FrameSpec) if f.name != "time_ms")


def _but_time(spec: FrameSpec) -> tuple:
    """Every field of a spec but its time (a trace memo key; `dataclasses.replace` took 30 us a frame)."""
    return tuple(getattr(spec, name) for name in _SPEC_FIELDS)


def _fresh(value):
    """A copy of a JSON-like value (dicts and lists copied, the rest shared): a caller may change its
    trace without changing the memo's (copy.deepcopy took 0.1 ms a frame)."""
    if isinstance(value, dict):
        return {k: _fresh(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_fresh(v) for v in value]
    return value


@dataclass(eq=False)
class _Drawn:
    """One frame between its phases (Renderer._prepare, _issue, _finish)."""

    model: Model
    spec: FrameSpec
    digest: str
    seq: int | None
    camera: Camera
    gpu: object  # renderer.scene.ModelGPU
    pose: object
    fx: object
    lights: object
    notes: list
    fb: object = None  # the framebuffer it was issued into
    stats: dict | None = None  # the effects' draw counts (Renderer.effects.last_stats once read back)


@dataclass(eq=False)
class _Ahead:
    """The frame a `render(then=...)` prepared for the next call: its state, or what preparing it raised."""

    model: Model
    spec: FrameSpec
    model_digest: str | None
    drawn: _Drawn | None = None
    error: Exception | None = None

    @classmethod
    def attempt(cls, model: Model, spec: FrameSpec, model_digest: str | None, step) -> _Ahead:
        try:
            return cls(model, spec, model_digest, drawn=step())
        except Exception as e:  # noqa: BLE001 - raised by the call that asks for this frame
            return cls(model, spec, model_digest, error=e)

    def serves(self, model: Model, spec: FrameSpec, model_digest: str | None) -> bool:
        return self.model is model and self.model_digest == model_digest and self.spec == spec


def _cancel(ahead: _Ahead | None) -> None:
    """A prepared frame that will not be read: its framebuffer's read-back is forgotten (it is free again)."""
    if ahead is not None and ahead.drawn is not None and ahead.drawn.fb is not None:
        ahead.drawn.fb.cancel_read()


@dataclass(eq=False)
class _Memo:
    """What a renderer keeps per model object between its frames (dropped by `Renderer.forget`)."""

    model: Model
    context: ModelContext  # where it came from, how its inputs are found (renderer.context)
    digest: str | None = None  # content hash
    cameras: dict = field(default_factory=dict)  # (camera spec, sequence, aspect) -> Camera
    # (the trace but its time, its keys that hold dicts or lists) by what decides it (Renderer.trace)
    traces: dict = field(default_factory=dict)


def _polygon_mode(lines: bool) -> None:
    from OpenGL import GL

    GL.glPolygonMode(GL.GL_FRONT_AND_BACK, GL.GL_LINE if lines else GL.GL_FILL)


__all__ = ["Frame", "FrameSpec", "Renderer"]
