"""`Renderer.render(model, FrameSpec) -> Frame`: the one public entry for drawing a frame.

A frame is a pure function of its trace: the model's content hash, sequence, time, camera, size,
MSAA, team colour, background, this renderer's version and the GL environment. Everything that
decides the pixels goes into `Frame.trace`; nothing else (wall time, order, process) may.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from renderer.anim import TIME_RULE, find_sequence
from renderer.anim.tracks import check_time
from renderer.camera import Camera, resolve_camera
from renderer.errors import Diagnostic
from renderer.fx import FX_RULE, Effects
from renderer.model import Model

RENDERER_VERSION = "0.1"


@dataclass(frozen=True)
class FrameSpec:
    sequence: int | str | None = None  # index or name; None = the first sequence (rest pose if none)
    time_ms: int = 0  # from the sequence start
    width: int = 512
    height: int = 512
    camera: str = "auto"  # auto | CAMS name | ex,ey,ez:tx,ty,tz[:ux,uy,uz[:fov]]
    team: int = 0
    msaa: int = 0
    background: str = "transparent"  # transparent | #rrggbb
    assets: tuple = ()
    missing_textures: str = "checker"  # checker | white
    instance_seed: int = 0  # seeds this model instance's particle emitters (renderer.fx.rng)

    def __post_init__(self):
        check_time(self.time_ms)  # 0 .. renderer.anim.tracks.MAX_TIME_MS, finite

    def background_rgba(self) -> tuple[float, float, float, float]:
        if self.background == "transparent":
            return (0.0, 0.0, 0.0, 0.0)
        m = re.fullmatch(r"#?([0-9a-fA-F]{6})", self.background)
        if not m:
            raise ValueError(f"background must be 'transparent' or '#rrggbb', got {self.background!r}")
        v = int(m.group(1), 16)
        return ((v >> 16 & 255) / 255, (v >> 8 & 255) / 255, (v & 255) / 255, 1.0)


@dataclass
class Frame:
    rgba: np.ndarray
    trace: dict
    diagnostics: list[Diagnostic] = field(default_factory=list)


def model_hash(model: Model) -> str:
    """sha256 of the model file's bytes (or of its MDX serialisation when it has no file)."""
    if model.path and Path(model.path).is_file():
        return hashlib.sha256(Path(model.path).read_bytes()).hexdigest()
    from renderer.formats.mdx import write_mdx

    return hashlib.sha256(write_mdx(model)).hexdigest()


def resolve_sequence(model: Model, sequence: int | str | None) -> int | None:
    """The sequence index a FrameSpec means: None is the first sequence, or no sequence at all."""
    if sequence is None:
        return 0 if model.sequences else None
    return find_sequence(model, sequence)


class Renderer:
    """Owns one GL context (created lazily, in the calling process) and per-model GPU resources."""

    def __init__(self, backend: str = "auto"):
        self.backend = backend
        self._ctx = None
        self._program = None
        self._palette = None
        self._models: dict[int, object] = {}
        self._digests: dict[int, tuple[Model, str]] = {}  # id(model) -> (model, content hash)
        self._fx_programs = None
        self.effects = Effects()  # particle/ribbon simulations kept between frames (renderer.fx)

    @property
    def context(self):
        if self._ctx is None:
            from renderer.gl import create_context

            self._ctx = create_context(self.backend)
            self._ctx.make_current()
        return self._ctx

    def gl_info(self) -> dict:
        return self.context.info.as_dict()

    def _gpu(self, model: Model, spec: FrameSpec):
        from renderer.scene import ModelGPU

        key = (id(model), spec.team, tuple(spec.assets), spec.missing_textures)
        gpu = self._models.get(key)
        if gpu is None or gpu.model is not model:
            if gpu is not None:
                gpu.delete()
            gpu = ModelGPU(model, spec.assets, spec.team, spec.missing_textures)
            self._models[key] = gpu
        return gpu

    def forget(self, model: Model) -> None:
        """Free the GPU resources of a model (call when a batch moves on to another model)."""
        for key in [k for k in self._models if k[0] == id(model)]:
            self._models.pop(key).delete()
        self._digests.pop(id(model), None)
        self.effects.forget(model)

    def _digest(self, model: Model, given: str | None) -> str:
        """The model's content hash, computed once per model object (it is read on every frame)."""
        if given:
            return given
        known = self._digests.get(id(model))
        if known is None or known[0] is not model:
            known = (model, model_hash(model))
            self._digests[id(model)] = known
        return known[1]

    def _pose(self, model: Model, spec: FrameSpec):
        """(sequence index, camera, GPU resources, pose) of a frame; the context is made current."""
        self.context.make_current()
        seq = resolve_sequence(model, spec.sequence)
        camera = resolve_camera(spec.camera, model, seq, spec.width / spec.height)
        gpu = self._gpu(model, spec)
        return seq, camera, gpu, gpu.animator.pose(seq, spec.time_ms, camera.view())

    def reset_effects(self) -> None:
        """Drop every running particle/ribbon simulation: the next frame simulates from t = 0."""
        self.effects.reset()

    def render(self, model: Model, spec: FrameSpec, model_digest: str | None = None) -> Frame:
        from renderer.gl.framebuffer import Framebuffer
        from renderer.gl.model_program import ModelProgram
        from renderer.gl.resources import PaletteBuffer
        from renderer.scene import draw_model

        bg = spec.background_rgba()
        seq, camera, gpu, pose = self._pose(model, spec)
        aspect = spec.width / spec.height
        if self._program is None:
            self._program = ModelProgram()
            self._palette = PaletteBuffer()
        # Effects: the content hash seeds the emitters, so it is known before drawing.
        digest = self._digest(model, model_digest)
        fx = self.effects.at(model, gpu.animator, seq, spec.time_ms, spec.instance_seed, digest, camera.view())
        fb = Framebuffer(spec.width, spec.height, spec.msaa)
        try:
            fb.clear(bg)
            draw_model(gpu, pose, camera, aspect, self._program, self._palette)
            if fx is not None:
                self._draw_effects(fx, gpu, pose, camera, aspect, spec)
            rgba = fb.read_rgba()
            granted = fb.granted_samples
        finally:
            fb.delete()
        trace = self.trace(model, spec, seq, camera, granted, digest)
        return Frame(rgba, trace, list(gpu.diagnostics))

    def _draw_effects(self, fx, gpu, pose, camera, aspect, spec) -> None:
        from renderer.fx.draw import draw_effects
        from renderer.gl.particles import EffectPrograms

        if self._fx_programs is None:
            self._fx_programs = EffectPrograms()
        self.effects.last_stats = draw_effects(fx, gpu, pose, camera, aspect, self._fx_programs, self._program,
                                               self._palette, spec)

    def skinned_vertices(self, model: Model, spec: FrameSpec) -> list[tuple[np.ndarray, np.ndarray] | None]:
        """Per geoset, the (positions, normals) the GPU skinning produces for this frame's pose,
        read back with transform feedback (None for geosets with nothing to draw)."""
        from renderer.gl.feedback import SkinFeedback
        from renderer.gl.framebuffer import Framebuffer
        from renderer.gl.resources import PaletteBuffer
        from renderer.scene import upload_palettes

        _, _, gpu, pose = self._pose(model, spec)
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
            "gl": self.gl_info(),
        }

    def close(self) -> None:
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


__all__ = ["Frame", "FrameSpec", "Renderer"]
