"""Drawing one model: GPU resources per model, the per-frame state, and the layer draw loop.

Draw order follows the game: geosets whose material starts with an opaque layer (None or
Transparent) first, in file order; then the rest, stably sorted by the material's priority plane.
Each geoset draws its material's layers in order with the blend/depth state of `renderer.blending`.
Reforged HD materials (a 900/1000 material with shader "Shader_HD_DefaultUnit", or 1100+ layers
with shaderTypeId 1) draw one pass per HD layer with their six texture slots (`renderer.hd`, the
shading rules in `renderer.rules`); a slot without a found texture binds its `HD_NEUTRAL` constant.
Geosets of HD materials carry tangents: TANG, or generated from UV set 0 (`renderer.tangents`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from renderer import blending, hd
from renderer.context import ModelContext
from renderer.errors import Diagnostic
from renderer.gl.calls import check, fast
from renderer.gl.model_program import HD_SLOT_UNIFORMS, HD_SLOT_UNITS
from renderer.gl.state import StateCache
from renderer.hd import is_hd
from renderer.model import Model
from renderer.rules import DEFAULT_LIGHTING, HD_NEUTRAL, HD_SLOTS, lighting_rule
from renderer.tangents import generate_tangents
from renderer.texture_set import TextureSettings


@dataclass(frozen=True)
class FrameDraw:
    """What every draw of one frame shares, made once per frame (`renderer.frame.Renderer.render`) and
    passed whole to `draw_model`, `renderer.fx.draw.draw_effects` and `renderer.fx.events.draw_events`:
    the camera and aspect, the GL programs and palette buffer, the frame's FrameSpec (its lighting rule,
    instance seed and asset settings) and the model's own lights. Child models are drawn with a copy
    (`dataclasses.replace`): no model lights, or the camera placed in the child's space."""

    camera: Any  # renderer.camera.Camera, or renderer.fx.draw.PlacedCamera for a child's effects
    aspect: float
    program: Any  # renderer.gl.model_program.ModelProgram
    palette: Any  # renderer.gl.resources.PaletteBuffer
    spec: Any = None  # renderer.frame.FrameSpec; None: the default lighting rule (tests, benches)
    lights: Any = None  # renderer.lights.FrameLights shading the model, or None (the plain program variants)
    effects: Any = None  # renderer.gl.particles.EffectPrograms, for the effects and events passes

    @property
    def lighting(self) -> str:
        return DEFAULT_LIGHTING if self.spec is None else self.spec.lighting


class ModelGPU:
    """Vertex buffers, textures and the compiled animation of one model in the current context."""

    def __init__(self, model: Model, textures: TextureSettings, context: ModelContext):
        # the animation compiler and the GL uploads load with the first model drawn
        from renderer.anim import Animator
        from renderer.gl.resources import GeosetBuffers, upload_loaded, upload_texture
        from renderer.texture_set import load_textures

        self.model = model
        self.context = context  # where it came from, how its inputs are found (renderer.context)
        self.animator = Animator(model)
        self.diagnostics: list[Diagnostic] = [Diagnostic("animation", None, note) for note in self.animator.notes]
        self.geosets: list[GeosetBuffers | None] = []
        for g, skin in zip(model.geosets, self.animator.skins, strict=True):
            tris = g.triangles
            if len(g.vertices) == 0 or len(tris) == 0:
                self.geosets.append(None)
                continue
            self.geosets.append(GeosetBuffers(g.vertices, g.normals, skin.bone_indices.astype(np.float32),
                                              skin.bone_weights, g.uv_sets, tris, _tangents(model, g, tris)))
        texset = load_textures(model, textures, context=context)
        self.diagnostics.extend(texset.diagnostics)
        self.search = texset.search  # every asset lookup of this model (AssetSearch.record)
        self.textures = [upload_loaded(t) for t in texset.textures]
        self.found = [t.source != "missing" for t in texset.textures]
        self.fallback = upload_texture(np.full((1, 1, 4), 255, np.uint8), False, False)
        self.neutral = {slot: upload_texture(np.array([[rgba]], np.uint8), True, True, mipmaps="none")
                        for slot, rgba in HD_NEUTRAL.items()}
        self.passes = layer_passes(model, self.animator, draw_order(model))
        self.effects = None  # renderer.fx.draw.EffectResources: particle textures, PREM child models

    def delete(self) -> None:
        from OpenGL import GL

        for b in self.geosets:
            if b is not None:
                b.delete()
        if self.textures:
            GL.glDeleteTextures(len(self.textures), self.textures)
        GL.glDeleteTextures(1, [self.fallback])
        GL.glDeleteTextures(len(self.neutral), list(self.neutral.values()))
        self.neutral = {}
        self.geosets, self.textures = [], []
        if self.effects is not None:
            self.effects.delete()
            self.effects = None


def _tangents(model: Model, g, tris):
    """TANG for geosets of HD materials (generated when absent); None for the others."""
    if not (0 <= g.material_id < len(model.materials)) or not is_hd(model, model.materials[g.material_id]):
        return None
    if g.tangents is not None and len(g.tangents) == len(g.vertices):
        return g.tangents
    uv = g.uv_sets[0] if g.uv_sets else np.zeros((len(g.vertices), 2), np.float32)
    return generate_tangents(g.vertices, g.normals, uv, tris)


def _bind_hd_slots(gpu: ModelGPU, pose, cache, program: int, loc, material_id: int, li: int, flat: int) -> int:
    """Bind the HD slot textures of one layer (units 2..6) and their uniforms; returns the diffuse id."""
    from OpenGL import GL

    gl = cache.gl
    ids = hd.slot_textures(gpu.model, pose, material_id, li)
    env_found = False
    for slot, tid in zip(HD_SLOTS[1:], ids[1:], strict=True):
        found = 0 <= tid < len(gpu.textures) and gpu.found[tid]
        tex = gpu.textures[tid] if found else gpu.neutral[slot]
        env_found = env_found or (slot == "environment" and found)
        cache.bind_texture(HD_SLOT_UNITS[slot], GL.GL_TEXTURE_2D, tex)
    cache.uniform(program, loc["u_env_found"], gl.glUniform1i, 1 if env_found else 0)
    cache.uniform(program, loc["u_emissive_gain"], gl.glUniform1f, float(pose.layer_emissive_gain[flat]))
    return ids[0]


def draw_order(model: Model) -> list[int]:
    """Geoset indices in drawing order (see the module docstring)."""
    opaque, rest = [], []
    for i, g in enumerate(model.geosets):
        if not 0 <= g.material_id < len(model.materials):
            continue
        mat = model.materials[g.material_id]
        first = mat.layers[0].filter_mode if mat.layers else 0
        (opaque if blending.layer_state(first).opaque else rest).append(i)
    rest.sort(key=lambda i: model.materials[model.geosets[i].material_id].priority_plane)
    return opaque + rest


@dataclass(frozen=True, slots=True)
class LayerPass:
    """One pass of the layer loop, fixed for the model: everything but the per-frame values (alpha,
    colour, texture ids, UV matrix), which come from the pose."""

    flat: int  # the pose's flat layer index
    material_id: int
    layer: int
    state: blending.BlendState
    depth_test: bool
    depth_write: bool
    cull: bool
    hd: bool
    shaded: bool  # lit by the lighting rule (not Unshaded): the program variant
    alpha_test: bool  # the filter mode discards below an alpha (Transparent, Modulate): the program variant
    sphere_env: int
    coord_id: int
    texture_animation: int  # -1: none
    texture_slot: int  # a 1100+ layer's texture slot (the diffuse one, else the first) whose id it draws; -1: none
    # From the fields above, made once so that the draw loop compares them instead of rebuilding them:
    variant: tuple = field(init=False)  # (hd, shaded, alpha_test): ModelProgram.variant's key
    gl_state: tuple = field(init=False)  # (state, depth_test, depth_write, cull): StateCache.apply's arguments
    opaque: int = field(init=False)  # u_opaque
    constants: tuple = field(init=False)  # u_alpha_test (alpha-test variants), u_opaque, u_sphere_env

    def __post_init__(self):
        object.__setattr__(self, "variant", (self.hd, self.shaded, self.alpha_test))
        object.__setattr__(self, "gl_state", (self.state, self.depth_test, self.depth_write, self.cull))
        object.__setattr__(self, "opaque", 1 if self.state.opaque else 0)
        object.__setattr__(self, "constants", (self.state.alpha_test if self.alpha_test else None, self.opaque,
                                               self.sphere_env))


def layer_passes(model: Model, animator, order: list[int]) -> list[tuple[int, list[LayerPass]]]:
    """(geoset, its passes) in drawing order, per the rules of the module docstring."""
    out = []
    for gi in order:
        g = model.geosets[gi]
        mat = model.materials[g.material_id]
        passes = []
        n_anim = len(model.texture_animations)
        for li in hd.drawn_layers(model, mat):
            layer = mat.layers[li]
            flat = animator.layer_index[(g.material_id, li)]
            st = blending.layer_state(layer.filter_mode)
            flags = layer.shading_flags
            two_sided = flags & blending.TWO_SIDED or mat.flags & 0x2  # layer or material TwoSided
            passes.append(LayerPass(
                flat=flat, material_id=g.material_id, layer=li, state=st,
                depth_test=not flags & blending.NO_DEPTH_TEST,
                depth_write=bool(st.depth_write and not flags & blending.NO_DEPTH_SET), cull=not two_sided,
                hd=hd.is_hd_layer(model, mat, li), shaded=not flags & (blending.UNSHADED | 0x100),
                alpha_test=st.alpha_test > 0,
                sphere_env=1 if flags & blending.SPHERE_ENV_MAP else 0, coord_id=layer.coord_id,
                texture_animation=layer.texture_animation_id if 0 <= layer.texture_animation_id < n_anim else -1,
                texture_slot=texture_slot(model, animator, flat)))
        out.append((gi, passes))
    return out


def texture_slot(model: Model, layers, flat: int) -> int:
    """The Reforged texture slot whose (animated) id a 1100+ layer draws: its diffuse slot, else its
    first; -1 (the layer's own texture id) for older models and layers without slots. `layers`: an
    Animator or a Pose (their `slot_layer`, `slot_kind`)."""
    slots = np.flatnonzero(layers.slot_layer == flat)
    if model.version >= 1100 and len(slots):
        diffuse = slots[layers.slot_kind[slots] == 0]
        return int(diffuse[0] if len(diffuse) else slots[0])
    return -1


def layer_texture(pose, flat: int, slot: int) -> int:
    """The texture id layer `flat` draws in this pose (`slot` from `texture_slot`)."""
    return int(pose.slot_texture_id[slot] if slot >= 0 else pose.layer_texture_id[flat])


_NO_UV_ANIMATION = np.eye(3, dtype=np.float32)


def upload_palettes(pose, palette) -> list[int]:
    """One palette buffer for the frame: every geoset's matrices back to back, bound to unit 1.
    Geosets that share one palette (weighted skins all use the node palette) share its rows.

    Returns each geoset's first row in the buffer."""
    from OpenGL import GL

    offsets, parts, first, at = [], [], {}, 0
    for p in pose.palettes:
        row = first.get(id(p))
        if row is None:
            row = first[id(p)] = at
            parts.append(p)
            at += len(p)
        offsets.append(row)
    palette.upload_parts(parts)
    gl = fast()
    gl.glActiveTexture(GL.GL_TEXTURE1)
    gl.glBindTexture(GL.GL_TEXTURE_BUFFER, palette.texture)
    gl.glActiveTexture(GL.GL_TEXTURE0)
    return offsets


def _frame_uniforms(cache, program, prog, loc, frame) -> None:
    """The frame's uniforms (view, projection, lighting rule, eye), each set where the program holds
    another value."""
    view, projection, rule, eye = frame
    gl = cache.gl
    cache.uniform_matrix(prog, loc["u_view"], gl.glUniformMatrix4fv, view)
    cache.uniform_matrix(prog, loc["u_projection"], gl.glUniformMatrix4fv, projection)
    program.set_lighting(loc, rule, cache, prog)
    cache.uniform(prog, loc["u_texture"], gl.glUniform1i, 0)
    cache.uniform(prog, loc["u_palette"], gl.glUniform1i, 1)
    for slot, name in HD_SLOT_UNIFORMS.items():
        cache.uniform(prog, loc[name], gl.glUniform1i, HD_SLOT_UNITS[slot])
    cache.uniform(prog, loc["u_eye"], gl.glUniform3f, *eye)


_last_frame: list = [None, None]  # [(camera, aspect, lighting), _FrameConstants] of the last frame drawn


@dataclass(frozen=True, slots=True)
class _FrameConstants:
    """What a frame's draws share that depends on its camera, aspect and lighting rule alone."""

    uniforms: tuple  # (view, projection, rule, eye): _frame_uniforms' values
    key: tuple  # what the frame's uniforms hold, by value (ModelProgram.uniform_values' "frame" entries)


def frame_constants(camera, aspect: float, lighting: str) -> _FrameConstants:
    """The frame uniforms of `camera` (an object that never changes: renderer.camera.Camera is frozen),
    `aspect` and `lighting`, made once while consecutive frames share them."""
    key = _last_frame[0]
    if key is not None and key[0] is camera and key[1] == aspect and key[2] == lighting:
        return _last_frame[1]
    view = np.asarray(camera.view(), np.float32)
    projection = np.asarray(camera.projection(aspect), np.float32)
    eye = tuple(float(v) for v in camera.eye)
    made = _FrameConstants((view, projection, lighting_rule(lighting), eye),
                           (view.tobytes(), projection.tobytes(), eye, lighting))
    _last_frame[:] = [(camera, aspect, lighting), made]
    return made


def draw_model(gpu: ModelGPU, pose, draw: FrameDraw) -> None:
    """Draw the posed model with `draw`'s camera, programs and lighting rule; `draw.lights`: a
    `renderer.lights.FrameLights` to shade with the model's own lights (the program's light-loop
    variants), or None (the plain variants: the frame of a model without this feature)."""
    from OpenGL import GL

    program, lights = draw.program, draw.lights
    constants = frame_constants(draw.camera, draw.aspect, draw.lighting)
    program.select_lights(lights is not None)
    framed: dict[tuple, tuple[int, dict]] = {}  # the variants this frame has bound, with the frame's uniforms
    held = program.uniform_values
    frame_key = constants.key if lights is None else None

    def bind(variant: tuple) -> tuple[int, dict]:
        """Bind the layer's program variant; the first time in the frame, load the frame's uniforms."""
        prog, loc = framed[variant] = program.variant(*variant)
        cache.use_program(prog)
        if frame_key is not None and held.get((prog, "frame")) == frame_key:
            return prog, loc  # an earlier frame set them to these values
        held[(prog, "frame")] = frame_key
        _frame_uniforms(cache, program, prog, loc, constants.uniforms)
        if lights is not None:
            program.set_lights(loc, lights)
        return prog, loc

    offsets = upload_palettes(pose, draw.palette)

    cache = StateCache(held)  # the loop sets only what differs from before
    gl = cache.gl
    cache.enable(GL.GL_DEPTH_TEST, True)
    cache.depth_func(GL.GL_LEQUAL)
    gl.glFrontFace(GL.GL_CCW)
    uniform, use_program, apply = cache.uniform, cache.use_program, cache.apply
    set_1i, set_1f, set_4f, set_matrix3 = gl.glUniform1i, gl.glUniform1f, gl.glUniform4f, gl.glUniformMatrix3fv
    texture_2d, textures, fallback = GL.GL_TEXTURE_2D, gpu.textures, gpu.fallback
    visible, geoset_alpha, geoset_color = pose.geoset_visible, pose.geoset_alpha, pose.geoset_color
    layer_alphas, uv_matrices = pose.layer_alpha, pose.uv_matrices
    applied = None  # the gl_state the cache last applied (nothing else in the loop changes that state)
    for gi, passes in gpu.passes:
        buf = gpu.geosets[gi]
        if buf is None or not visible[gi]:
            continue
        alpha = float(geoset_alpha[gi])
        red, green, blue = (float(c) for c in geoset_color[gi])
        gl.glBindVertexArray(buf.vao)
        offset = offsets[gi]
        for p in passes:
            layer_alpha = float(layer_alphas[p.flat]) * alpha
            if layer_alpha <= 0.0:
                continue
            st = p.state
            if p.gl_state != applied:
                apply(st, p.depth_test, p.depth_write, p.cull)
                applied = p.gl_state
            found = framed.get(p.variant)
            if found is None:
                prog, loc = bind(p.variant)
            else:
                prog, loc = found
                use_program(prog)
            uniform(prog, loc["u_palette_offset"], set_1i, offset)
            tid = (_bind_hd_slots(gpu, pose, cache, prog, loc, p.material_id, p.layer, p.flat) if p.hd
                   else layer_texture(pose, p.flat, p.texture_slot))
            cache.bind_texture(0, texture_2d, textures[tid] if 0 <= tid < len(textures) else fallback)
            uniform(prog, loc["u_color"], set_4f, red, green, blue, layer_alpha)
            if held.get((prog, "pass")) != p.constants:  # the pass's constant uniforms, unless held
                if p.alpha_test:
                    uniform(prog, loc["u_alpha_test"], set_1f, st.alpha_test)
                uniform(prog, loc["u_opaque"], set_1i, p.opaque)
                uniform(prog, loc["u_sphere_env"], set_1i, p.sphere_env)
                held[(prog, "pass")] = p.constants
            cache.uniform_matrix(prog, loc["u_uv_matrix"], set_matrix3,
                                 uv_matrices[p.texture_animation] if p.texture_animation >= 0 else _NO_UV_ANIMATION,
                                 key=p.texture_animation)
            buf.use_uv_set(p.coord_id)
            buf.draw(gl)
    _leave_loop(gl)


def _leave_loop(gl) -> None:
    """The state a draw loop leaves behind (unit 0 active, no program or vertex array, depth writes on,
    no blending), then the loop's one error check."""
    from OpenGL import GL

    gl.glActiveTexture(GL.GL_TEXTURE0)
    gl.glUseProgram(0)
    gl.glBindVertexArray(0)
    gl.glDepthMask(GL.GL_TRUE)
    gl.glDisable(GL.GL_BLEND)
    check("drawing the model's layers")
