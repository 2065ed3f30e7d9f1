"""The effects pass of a frame: child model instances, particles and ribbons of one simulation.

Order, after the model's geosets: PREM child model instances first (they are models: the geoset
draw code, each instance through its own world matrix), then every particle emitter and ribbon,
stably sorted by priority plane (PRE2: its priorityPlane; RIBB: its material's priority plane; PREM
textured particles: 0), in the order PREM, PRE2, RIBB, file order within a kind. Each PRE2 emitter
is one instanced draw per filter mode its particles carry (one, the emitter's), each ribbon one strip
draw. Depth test on, depth write per blend state (no particle state writes depth), culling off.

Textures: PRE2 replaceable id 0 uses model texture `textureId` (out of range: the missing-texture
placeholder, with a diagnostic), 1 / 2 the team colour / glow of the frame's team, other ids
`texture_set.REPLACEABLE_PATHS` through the asset roots (not found: placeholder and diagnostic).
PREM textured particles use `path`; PREM child models are looked up like textures (the model's
folder, then the asset roots, case-insensitively), trying the other of .mdl / .mdx as well; a child
that cannot be found or loaded is reported once and not drawn. Child instances draw their geosets
(posed from their own first sequence at the particle's age, placed by T(position) . W3 at spawn); a
child's own emitters are simulated one level deep (`draw_effects`, `child_seed`).

Lighting: particles and ribbons of shaded emitters / layers are lit as a surface facing world +Z at
the origin under the frame's lighting rule (`renderer.rules.LightingRule.factor`; 1.0 for both named
rules); Unshaded ones are not. PREM child models are drawn under the frame's rule.
"""

from __future__ import annotations

import dataclasses
import hashlib
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

import numpy as np

from renderer import blending
from renderer.context import ModelContext
from renderer.errors import Diagnostic
from renderer.fx import pre2
from renderer.fx.prem import uses_model
from renderer.model import Model, Texture
from renderer.rules import DEFAULT_LIGHTING, PREM_TGA_HALF_SIZE, lighting_rule
from renderer.texture_set import TextureSettings


def effect_texture_settings(settings) -> TextureSettings:
    """The texture settings of a model's effects and child models: the frame's asset roots, team and
    placeholder; child models search their own folders and these roots (no game data, no stop root),
    as in 0.2 (goldens of PREM children keep their bytes)."""
    return TextureSettings(settings.assets, settings.team, settings.missing_textures)


@dataclass(frozen=True)
class EffectInput:
    """One lookup drawing an emitter makes: a texture (`texture`, through the model's search under
    `effect_texture_settings`) or a PREM child model (`child`, its path: looked up by
    `child_candidates`, then drawn with its own textures and effects)."""

    texture: Texture | None = None
    child: str | None = None


def pre2_input(replaceable_id: int) -> EffectInput | None:
    """What a PRE2 emitter looks up: a replaceable id's texture; None for id 0 (a texture of the
    model's own, `textureId`: looked up with the model's textures)."""
    return EffectInput(texture=Texture(replaceable_id=replaceable_id)) if replaceable_id else None


def prem_input(record) -> EffectInput:
    """What a PREM emitter looks up: its child model when it draws models, else its particles' texture."""
    if uses_model(record):
        return EffectInput(child=str(record.path))
    return EffectInput(texture=Texture(path=str(record.path)))


def effect_inputs(model: Model) -> list[EffectInput]:
    """Every lookup the effects pass may make for `model`'s emitters (whichever of them spawn), in the
    pass's own terms (`pre2_input`, `prem_input`: what `EffectResources` draws with)."""
    found = [pre2_input(int(e.replaceable_id)) for e in model.particle_emitters2]
    return [i for i in found if i is not None] + [prem_input(e) for e in model.particle_emitters]


def child_candidates(path: str) -> list[str]:
    """The names a PREM child model is looked up by, in order: its path, then the other of .mdl / .mdx."""
    candidates = [path] if path else []
    suffix = PurePosixPath(path.replace("\\", "/")).suffix.lower()
    if path and suffix in (".mdl", ".mdx"):
        candidates.append(path[: -len(suffix)] + (".mdx" if suffix == ".mdl" else ".mdl"))
    return candidates


def shade_factor(lighting: str = DEFAULT_LIGHTING) -> float:
    return float(lighting_rule(lighting).factor((0.0, 0.0, 1.0)))


class EffectResources:
    """Textures and child models the effects of one model need, in one GPU context (per ModelGPU)."""

    def __init__(self, gpu, textures: TextureSettings):
        self.gpu = gpu
        self.model: Model = gpu.model
        self.textures = textures  # of effect textures (through the model's search) and child models
        self._textures: dict[tuple, int] = {}
        self._children: dict[int, object] = {}
        self._child_fx: dict[int, tuple | None] = {}
        self._reported: set = set()

    @classmethod
    def of(cls, gpu, spec) -> EffectResources:
        """The model's resources (made on first use, kept on its ModelGPU), for effects and events alike."""
        if getattr(gpu, "effects", None) is None:
            gpu.effects = cls(gpu, effect_texture_settings(spec))
        return gpu.effects

    def _note(self, key, where: str, message: str) -> None:
        if key not in self._reported:
            self._reported.add(key)
            self.gpu.diagnostics.append(Diagnostic(where, None, message))

    def _load(self, key, texture: Texture, where: str) -> int:
        tex = self._textures.get(key)
        if tex is None:
            # GL side: imported when a frame is drawn (`import renderer` stays light)
            from renderer.gl.resources import upload_loaded
            from renderer.texture_set import load_textures

            holder = Model(textures=[texture], path=self.model.path)
            # The model's own search (renderer.assets: map root, asset roots, game data), so effect
            # textures are found like the model's and recorded with the frame's other lookups.
            # (a holder of one texture: no texture source of the model's)
            loaded = load_textures(holder, self.textures, search=self.gpu.search,
                                   context=ModelContext(self.gpu.context.location))
            for d in loaded.diagnostics:
                self.gpu.diagnostics.append(Diagnostic(where, d.offset, d.message))
            t = loaded.textures[0]
            tex = upload_loaded(t)
            self._textures[key] = tex
        return tex

    def pre2_texture(self, spec: pre2.Pre2Spec) -> int:
        where = f"PRE2 {spec.index}"
        own = pre2_input(spec.replaceable_id)
        if own is not None:
            return self._load(("rid", spec.replaceable_id), own.texture, where)
        tid = spec.texture_id
        if 0 <= tid < len(self.gpu.textures):
            return self.gpu.textures[tid]
        self._note(("tid", spec.index), where, f"texture id {tid} names no texture of the model "
                                               f"({len(self.gpu.textures)}); drawing a {self.textures.missing_textures}"
                                               f" placeholder")
        return self._load(("placeholder",), Texture(path=""), where)

    def prem_texture(self, spec) -> int:
        return self._load(("prem", spec.index), prem_input(spec.record).texture, f"PREM {spec.index}")

    def child(self, spec):
        """The child model's ModelGPU, or None (reported once) when it cannot be found or loaded."""
        if spec.index in self._children:
            return self._children[spec.index]
        # a child model (and its GPU side) loads only when an effect spawns one
        from renderer.errors import FormatError
        from renderer.formats import read
        from renderer.scene import ModelGPU

        where = f"PREM {spec.index}"
        path = str(spec.record.path)
        found = None
        for candidate in child_candidates(path):  # the model's own search: map root, asset roots, game data
            found = self.gpu.search.find(candidate, kind="child model")
            if found is not None:
                break
        child = None
        if found is None:
            self._note(("child", spec.index), where, f"child model {path!r} was not found in the model's folders,"
                                                     f" the asset roots or the game data; its particles are not drawn")
        else:
            try:  # from the bytes the search found (a worker's pinned inputs too), named where they were found
                loaded = self.gpu.context.child(read(found.data, found.where))
                child = ModelGPU(loaded.model, self.textures, loaded.context)
                self.gpu.diagnostics.extend(Diagnostic(where, d.offset, d.message) for d in child.diagnostics)
            except (FormatError, OSError, ValueError) as exc:
                msg = exc.sentence() if isinstance(exc, FormatError) else str(exc)
                self._note(("child", spec.index), where, f"child model {path!r} cannot be loaded: {msg}; "
                                                         f"its particles are not drawn")
        self._children[spec.index] = child
        return child

    def child_effects(self, spec, child):
        """(an Effects cache, the child model's content hash) for simulating a PREM child's own
        emitters, or None when the child model has none."""
        if spec.index not in self._child_fx:
            from renderer.fx.simulation import Effects  # the simulator, only for models whose children emit

            has = bool(child.model.particle_emitters2 or child.model.particle_emitters or child.model.ribbon_emitters)
            path = Path(child.model.path or "")
            digest = hashlib.sha256(path.read_bytes() if path.is_file() else str(child.model.name).encode()).hexdigest()
            self._child_fx[spec.index] = (Effects(capacity=256), digest) if has else None
        return self._child_fx[spec.index]

    def delete(self) -> None:
        from OpenGL import GL

        if self._textures:
            GL.glDeleteTextures(len(self._textures), list(self._textures.values()))
        for child in self._children.values():
            if child is not None:
                child.delete()
        self._textures, self._children, self._child_fx = {}, {}, {}


def prem_quads(e, sim) -> np.ndarray:
    p = e.particles
    n = len(p)
    out = np.zeros((n, pre2.INSTANCE_FLOATS), np.float32)
    if n:
        w3 = sim.world[e.spec.node][:3, :3]
        out[:, 0:3] = p["pos"]
        out[:, 6:10] = 1.0
        out[:, 12:14] = 1.0
        out[:, 14] = PREM_TGA_HALF_SIZE * float(np.cbrt(abs(np.linalg.det(w3))))
        out[:, 15] = pre2.KIND_BILLBOARD
    return out


class PlacedCamera:
    """A camera seen from a child instance's model space: view . M, the same projection."""

    def __init__(self, camera, matrix: np.ndarray):
        self._camera, self._view = camera, np.asarray(camera.view(), np.float64) @ matrix

    def view(self) -> np.ndarray:
        return self._view

    def projection(self, aspect: float) -> np.ndarray:
        return self._camera.projection(aspect)


def child_seed(instance_seed: int, emitter_index: int, identity: int) -> int:
    """The instance seed of a PREM child's own emitters: from the parent instance, the PREM emitter
    and the particle's identity (`PremEmitter.identities`), so a child's effects are the same
    whichever frames, batches or processes render it."""
    digest = hashlib.sha256(f"prem-child:{int(instance_seed)}:{int(emitter_index)}:{int(identity)}".encode())
    return int.from_bytes(digest.digest()[:8], "little") >> 1


def draw_effects(sim, gpu, pose, draw, depth: int = 0) -> dict:
    """Draw the simulation's effects into the bound framebuffer with `draw` (a renderer.scene.FrameDraw
    with its `effects` programs); returns counts for tests/benches.

    PREM child instances run their own animation and, one level deep (`depth` 0: a child's children
    are drawn but their emitters are not simulated, which bounds the work), their own particles and
    ribbons: each child's effects are simulated at its age with `child_seed`, in its own model space,
    and drawn through its instance matrix."""
    stats = {"particles": 0, "ribbon_edges": 0, "children": 0, "draws": 0, "emitters": 0, "child_particles": 0}
    if sim is None:
        return stats
    res = EffectResources.of(gpu, draw.spec)
    view = draw.camera.view()
    shaded = shade_factor(draw.lighting)
    # 1. PREM child model instances.
    _draw_children(sim, res, draw, depth, stats)
    # 2. Particles and ribbons, by priority plane.
    items = []  # (plane, order, kind, payload)
    instances = _particle_items(sim, res, view, shaded, items, stats)
    strips = _ribbon_items(sim, gpu, pose, res, shaded, items, stats)
    if items:
        _submit(draw.effects, items, instances, strips, view, draw.camera.projection(draw.aspect), stats)
    return stats


def _draw_children(sim, res, draw, depth: int, stats: dict) -> None:
    """Each PREM child model instance at its age, and (at depth 0) its own effects."""
    # GL side: imported when a frame is drawn (`import renderer` stays light)
    from renderer.scene import draw_model

    camera, view, t = draw.camera, draw.camera.view(), sim.t_ms
    for e in sim.prem:
        if not e.spec.model or len(e.particles) == 0:
            continue
        child = res.child(e.spec)
        if child is None:
            continue
        seq = 0 if child.model.sequences else None
        own = res.child_effects(e.spec, child) if depth == 0 else None
        for m, age, ident in zip(e.instance_matrices(), e.ages_ms(t), e.identities(), strict=True):
            local = child.animator.pose(seq, float(age), view)
            cpose = dataclasses.replace(local, palettes=[np.einsum("ij,njk->nik", m, p) for p in local.palettes])
            draw_model(child, cpose, dataclasses.replace(draw, lights=None))
            stats["children"] += 1
            stats["draws"] += 1
            if own is not None:
                effects, digest = own
                placed = PlacedCamera(camera, m)
                csim = effects.at(child.model, child.animator, seq, max(float(age), 0.0),
                                  child_seed(sim.instance_seed, e.spec.index, int(ident)), digest, placed.view())
                if csim is not None:
                    cstats = draw_effects(csim, child, local, dataclasses.replace(draw, camera=placed), depth=1)
                    stats["child_particles"] += cstats["particles"] + cstats["ribbon_edges"]
                    stats["draws"] += cstats["draws"]


def _particle_items(sim, res, view, shaded: float, items: list, stats: dict) -> list:
    """The particle draws (PREM quads, PRE2 per filter mode) appended to `items`; their instance arrays."""
    instances, at, t = [], 0, sim.t_ms
    for e in sim.prem:
        if e.spec.model or len(e.particles) == 0:
            continue
        quads = prem_quads(e, sim)
        instances.append(quads)
        items.append((0, len(items), "particles", (at, len(quads), res.prem_texture(e.spec),
                                                   blending.particle_state(0), 1.0)))
        at += len(quads)
    for e in sim.pre2:
        s = e.spec
        if len(e.particles) == 0:
            continue
        inst, blend = e.instances(t, sim.world[s.node], view)
        tex = res.pre2_texture(s)
        shade = 1.0 if s.flags & pre2.UNSHADED else shaded
        for mode in dict.fromkeys(blend.tolist()):  # one draw per filter mode carried, in first-seen order
            chunk = inst[blend == mode]
            instances.append(chunk)
            items.append((s.priority_plane, len(items), "particles",
                          (at, len(chunk), tex, blending.particle_state(int(mode)), shade)))
            at += len(chunk)
        stats["emitters"] += 1
    return instances


def _ribbon_items(sim, gpu, pose, res, shaded: float, items: list, stats: dict) -> list:
    """The ribbon draws (each with its material's first layer) appended to `items`; their vertex strips."""
    # GL side: imported when a frame is drawn (`import renderer` stays light)
    from renderer.scene import layer_texture, texture_slot

    model = gpu.model
    strips, vat = [], 0
    cols = sim.fx.ribbon_table.columns
    for r in sim.ribbons:
        s = r.spec
        if not 0 <= s.material_id < len(model.materials) or not model.materials[s.material_id].layers:
            res._note(("ribbon", s.index), f"RIBB {s.index}", f"material id {s.material_id} names no material "
                                                             f"with a layer; the ribbon is not drawn")
            continue
        verts = r.vertices(sim.params["RIBB"][s.row], cols)
        if len(verts) == 0:
            continue
        mat = model.materials[s.material_id]
        layer = mat.layers[0]
        flat = pose.layer_index[(s.material_id, 0)]
        tid = layer_texture(pose, flat, texture_slot(model, pose, flat))
        tex = gpu.textures[tid] if 0 <= tid < len(gpu.textures) else gpu.fallback
        uvm = (pose.uv_matrices[layer.texture_animation_id]
               if 0 <= layer.texture_animation_id < len(pose.uv_matrices) else np.eye(3))
        flags = int(layer.shading_flags)
        shade = 1.0 if flags & (blending.UNSHADED | 0x100) else shaded
        strips.append(verts)
        items.append((mat.priority_plane, len(items), "ribbon",
                      (vat, len(verts), tex, blending.layer_state(layer.filter_mode),
                       (1.0, 1.0, 1.0, float(pose.layer_alpha[flat])), uvm, shade,
                       not flags & blending.NO_DEPTH_TEST,
                       None if not flags & blending.NO_DEPTH_SET else False)))
        vat += len(verts)
        stats["ribbon_edges"] += len(verts) // 2
    return strips


def _submit(programs, items: list, instances: list, strips: list, view, projection, stats: dict) -> None:
    """Upload the instances and strips, then draw `items` by priority plane (then in planned order)."""
    if instances:
        programs.upload_instances(np.concatenate(instances))
    if strips:
        programs.upload_ribbons(np.concatenate(strips))
    before = programs.draw_calls
    current = None
    for _plane, _order, kind, args in sorted(items, key=lambda it: (it[0], it[1])):
        if kind != current:
            (programs.begin_particles if kind == "particles" else programs.begin_ribbons)(view, projection)
            current = kind
        if kind == "particles":
            programs.draw_particles(*args)
            stats["particles"] += args[1]
        else:
            programs.draw_ribbon(*args)
    programs.end()
    stats["draws"] += programs.draw_calls - before
