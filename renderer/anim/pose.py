"""Everything a frame needs from animation, at (model, sequence, t_ms, camera).

`Animator(model)` compiles the model once (node hierarchy, every track grouped by value kind, the
static skinning data); `Animator.pose(sequence, t_ms, view)` is then a few hundred numpy operations.
`pose_at(model, sequence, t_ms, view)` is the one-off form. A pose is a pure function of its
arguments: poses computed in a batch, one by one or in any order are identical.

Time rule (part of the trace): see `renderer.anim.tracks` (sequence frame = start + t_ms, looping
sequences wrap past the end and non-looping ones hold; global sequences at t_ms mod duration).

Per-frame values and their rules
--------------------------------
* node_matrices (N, 4, 4): `renderer.anim.skeleton`, one row per node in object id order
  (`Animator.skeleton.ids[i]` is row i's object id; N = the number of nodes, never an id's value).
* node_visibility (N,): KATV / KLAV / KPEV / KP2V / KRVS / KPPV of the node's record (1 when the node
  has none); visible when > VISIBILITY_THRESHOLD (0), as the viewer tests it.
* geoset_alpha, geoset_color (RGB), geoset_visible: from the geoset's GEOA (the last GEOA naming the
  geoset, as the viewer assigns them); KGAO over the static alpha, KGAC over the static colour. The
  GEOA static colour is stored R, G, B and KGAC values B, G, R (`rules.GEOA_STATIC_COLOR_BGR`,
  `rules.GEOA_TRACK_COLOR_BGR`); both are returned as R, G, B. The colour applies whatever the GEOA
  flags say (as the viewer does). A geoset is hidden when its alpha <= GEOSET_HIDDEN_ALPHA (0.01).
  Without a GEOA: alpha 1, colour (1, 1, 1).
* layers, flattened in material order (`layer_index[(material, layer)]`): layer_alpha (KMTA over
  the static alpha), layer_emissive_gain (KMTE over the static gain), layer_texture_id (KMTF over
  the static texture id; an integer track, never interpolated). Reforged per-slot textures
  (`Layer.textures`) are flattened into slot_texture_id with slot_layer / slot_kind beside them.
* uv_matrices (n_texture_animations, 3, 3): uv' = M @ [u, v, 1] with translation t (KTAT), rotation
  q (KTAR) and scale s (KTAS) applied in the viewer's order: translate, rotate about (0.5, 0.5), scale
  about (0.5, 0.5):

      uv' = S R (uv + t.xy - h) + h,   h = (0.5, 0.5), S = diag(s.x, s.y), R = upper-left 2x2 of the
      rotation matrix of the normalised q,

      M = [[S R, S R (t.xy - h) + h], [0, 0, 1]].

  For a rotation about Z (what texture animations use) R is the 2D rotation by the quaternion's
  angle, what the viewer computes from q.z, q.w; we also honour s.y where the viewer uses s.x only.
* attachment_visibility (per `model.attachments` entry): its node's KATV.
* palettes (per geoset) and skins (static, per geoset): `renderer.anim.skinning`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import numpy as np

from renderer.anim import quat
from renderer.anim.skeleton import Skeleton
from renderer.anim.skinning import GeosetSkin, PaletteBuilder, geoset_skin
from renderer.anim.tracks import Clock, TrackBank, make_clock
from renderer.model import (
    Attachment,
    Light,
    Model,
    ParticleEmitter,
    ParticleEmitter2,
    PopcornEmitter,
    RibbonEmitter,
    Sequence,
)
from renderer.rules import GEOA_STATIC_COLOR_BGR, GEOA_TRACK_COLOR_BGR

GEOSET_HIDDEN_ALPHA = 0.01  # a geoset whose alpha is <= this is not drawn (viewer)
VISIBILITY_THRESHOLD = 0.0  # nodes (attachments, emitters, lights) show when visibility > this

_VISIBILITY_TAG = {Attachment: "KATV", Light: "KLAV", ParticleEmitter: "KPEV", ParticleEmitter2: "KP2V",
                   RibbonEmitter: "KRVS", PopcornEmitter: "KPPV"}


class UnknownSequence(ValueError):
    """A sequence name or index the model does not have; the message lists the model's sequences."""

    def __init__(self, key, names: list[str]):
        self.key = key
        self.available = list(names)
        listed = ", ".join(f"{i}: {n!r}" for i, n in enumerate(names)) or "none"
        super().__init__(f"unknown sequence {key!r}; the model has {len(names)} sequence(s): {listed}")


def _norm(name: str) -> str:
    return " ".join(str(name).split()).lower()


def find_sequence(model: Model, key) -> int:
    """Index of a sequence given by index or by name.

    Names match case-insensitively with runs of whitespace collapsed. When no name matches exactly, a
    name followed by a variation number matches too ("stand" finds "Stand 1", "Stand - 2"); the lowest
    number wins, then file order. A string of digits that names no sequence is taken as an index.
    """
    names = [s.name for s in model.sequences]
    if isinstance(key, (int, np.integer)) and not isinstance(key, bool):
        i = int(key)
        if 0 <= i < len(names):
            return i
        raise UnknownSequence(key, names)
    if not isinstance(key, str):
        raise UnknownSequence(key, names)
    want = _norm(key)
    for i, n in enumerate(names):
        if _norm(n) == want:
            return i
    numbered = []
    pattern = re.compile(re.escape(want) + r"\s*-?\s*(\d+)")
    for i, n in enumerate(names):
        m = pattern.fullmatch(_norm(n))
        if m:
            numbered.append((int(m.group(1)), i))
    if numbered:
        return min(numbered)[1]
    if want.isdigit() and int(want) < len(names):
        return int(want)
    raise UnknownSequence(key, names)


@dataclass(eq=False)
class Pose:
    sequence: int | None
    t_ms: float
    clock: Clock
    node_matrices: np.ndarray  # (N, 4, 4) float64, by skeleton row (object id order)
    node_visibility: np.ndarray  # (N,)
    geoset_alpha: np.ndarray  # (G,)
    geoset_color: np.ndarray  # (G, 3) RGB
    layer_alpha: np.ndarray  # (L,) flattened layers
    layer_emissive_gain: np.ndarray  # (L,)
    layer_texture_id: np.ndarray  # (L,) int64
    slot_texture_id: np.ndarray  # (S,) int64, Reforged per-slot textures
    uv_matrices: np.ndarray  # (T, 3, 3)
    attachment_visibility: np.ndarray  # (A,)
    palettes: list[np.ndarray]  # per geoset (P, 4, 4)
    skins: list[GeosetSkin]  # per geoset, static
    layer_index: dict  # (material, layer) -> flat layer index
    slot_layer: np.ndarray  # (S,) flat layer index of each slot
    slot_kind: np.ndarray  # (S,) slot number (0 diffuse .. 5 environment)
    notes: list[str] = field(default_factory=list)

    @property
    def geoset_visible(self) -> np.ndarray:
        return self.geoset_alpha > GEOSET_HIDDEN_ALPHA

    @property
    def attachment_visible(self) -> np.ndarray:
        return self.attachment_visibility > VISIBILITY_THRESHOLD

    @property
    def node_visible(self) -> np.ndarray:
        return self.node_visibility > VISIBILITY_THRESHOLD


class _Scatter:
    """Base values for one per-frame array plus where its animated rows come from."""

    def __init__(self, base):
        self.base = np.asarray(base, np.float64)
        self.parts: dict[str, tuple[list, list]] = {}

    def add(self, bank: TrackBank, dest: int, track, static=None):
        group, row = bank.add(track, static)
        d, r = self.parts.setdefault(group, ([], []))
        d.append(dest)
        r.append(row)

    def freeze(self):
        self.parts = {g: (np.array(d, np.int64), np.array(r, np.int64)) for g, (d, r) in self.parts.items()}

    def subset(self, rows: np.ndarray) -> _Scatter:
        """This (frozen) scatter restricted to the destination rows `rows` (sorted, unique): row j of its
        output is row rows[j] of this one's, from the same sampled values."""
        sub = _Scatter(self.base[rows])
        for group, (dest, src) in self.parts.items():
            pos = np.minimum(np.searchsorted(rows, dest), max(len(rows) - 1, 0))
            keep = (rows[pos] == dest) if len(rows) else np.zeros(len(dest), bool)
            if keep.any():
                sub.parts[group] = (pos[keep], src[keep])
        return sub

    def rebase(self, keep: dict) -> None:
        """Read sampled rows from a bank subset of the rows keep[group] (sorted) instead of the bank."""
        self.parts = {g: (dest, np.searchsorted(keep[g], src)) for g, (dest, src) in self.parts.items()}

    def fill(self, sampled: dict) -> np.ndarray:
        out = self.base.copy()
        for group, (dest, rows) in self.parts.items():
            values = sampled[group][rows]
            out[dest] = values if out.ndim > 1 else values[:, 0]
        return out


def uv_matrices(translation, rotation, scaling) -> np.ndarray:
    """(T, 3, 3) texture-coordinate matrices (see the module docstring)."""
    t = np.asarray(translation, np.float64).reshape(-1, 3)
    if not len(t):  # no texture animations: nothing to compute
        return np.zeros((0, 3, 3))
    r = quat.to_matrix(np.asarray(rotation, np.float64).reshape(-1, 4))[:, :2, :2]
    s = np.asarray(scaling, np.float64).reshape(-1, 3)
    lin = s[:, :2, None] * r  # diag(s.x, s.y) @ R
    h = np.array([0.5, 0.5])
    m = np.zeros((len(t), 3, 3))
    m[:, :2, :2] = lin
    m[:, :2, 2] = np.einsum("nij,nj->ni", lin, t[:, :2] - h) + h
    m[:, 2, 2] = 1.0
    return m


class Animator:
    """A model compiled for posing; `pose(sequence, t_ms, view)` per frame."""

    def __init__(self, model: Model):
        self.model = model
        self.skeleton = sk = Skeleton(model)
        bank = self.bank = TrackBank(model.global_sequences)
        # In this order: the bank numbers the tracks as they are added.
        self._compile_nodes(model, bank)
        self._compile_geosets(model, bank)
        self._compile_layers(model, bank)
        self._compile_texture_animations(model, bank)

        for scatter in (self._t, self._r, self._s, self._vis, self._alpha, self._color, self._lalpha, self._lgain,
                        self._ltex, self._stex, self._tat, self._tar, self._tas):
            scatter.freeze()
        bank.freeze()

        self.attachment_rows = sk.rows([a.object_id for a in model.attachments])
        self.skins = [geoset_skin(geo, sk.ids) for geo in model.geosets]
        self.palettes = PaletteBuilder(self.skins, sk.count)
        self._last_pose: tuple | None = None  # (Animator._pose_key, Pose) of the last pose (Animator.pose)
        self._still: dict = {}  # interval -> TrackBank.still(interval)
        self.notes = list(sk.notes)
        for gi, s in enumerate(self.skins):
            self.notes += [f"geoset {gi}: {msg}" for msg in s.notes]

    def _compile_nodes(self, model: Model, bank: TrackBank) -> None:
        """Nodes: translation, rotation, scaling, visibility."""
        n = self.skeleton.count
        self._t = _Scatter(np.zeros((n, 3)))
        self._r = _Scatter(np.tile(quat.IDENTITY, (n, 1)))
        self._s = _Scatter(np.ones((n, 3)))
        self._vis = _Scatter(np.ones(n))
        for row, node in enumerate(self.skeleton.nodes):
            for tag, target in (("KGTR", self._t), ("KGRT", self._r), ("KGSC", self._s)):
                track = node.node_tracks.get(tag)
                if track is not None:
                    target.add(bank, row, track)
            vtag = _VISIBILITY_TAG.get(type(node))
            track = node.tracks.get(vtag) if vtag else None
            if track is not None:
                self._vis.add(bank, row, track, 1.0)

    def _compile_geosets(self, model: Model, bank: TrackBank) -> None:
        """Geoset animations (the last GEOA naming a geoset wins, as in the viewer)."""
        g = len(model.geosets)
        geoa = {}
        for a in model.geoset_animations:
            if 0 <= a.geoset_id < g:
                geoa[a.geoset_id] = a
        alpha = np.ones(g)
        color = np.ones((g, 3))
        # Colours are kept in the tracks' component order and turned to RGB per frame.
        static_order = slice(None, None, -1 if GEOA_STATIC_COLOR_BGR != GEOA_TRACK_COLOR_BGR else 1)
        for gi, a in geoa.items():
            alpha[gi] = a.alpha
            color[gi] = np.asarray(a.color, np.float64)[static_order]
        self._alpha = _Scatter(alpha)
        self._color = _Scatter(color)
        for gi, a in geoa.items():
            if "KGAO" in a.tracks:
                self._alpha.add(bank, gi, a.tracks["KGAO"], a.alpha)
            if "KGAC" in a.tracks:
                self._color.add(bank, gi, a.tracks["KGAC"], tuple(color[gi]))

    def _compile_layers(self, model: Model, bank: TrackBank) -> None:
        """Layers (flattened) and Reforged texture slots."""
        self.layer_index: dict[tuple[int, int], int] = {}
        la, le, lt, st, slot_layer, slot_kind = [], [], [], [], [], []
        layer_tracks, slot_tracks = [], []
        for mi, mat in enumerate(model.materials):
            for li, lay in enumerate(mat.layers):
                flat = len(la)
                self.layer_index[(mi, li)] = flat
                la.append(lay.alpha)
                le.append(lay.emissive_gain)
                lt.append(lay.texture_id)
                layer_tracks.append((flat, lay))
                for slot in lay.textures:
                    slot_tracks.append((len(st), slot))
                    st.append(slot.texture_id)
                    slot_layer.append(flat)
                    slot_kind.append(slot.slot)
        self._lalpha, self._lgain = _Scatter(np.array(la, np.float64)), _Scatter(np.array(le, np.float64))
        self._ltex, self._stex = _Scatter(np.array(lt, np.float64)), _Scatter(np.array(st, np.float64))
        for flat, lay in layer_tracks:
            for tag, target, static in (("KMTA", self._lalpha, lay.alpha), ("KMTE", self._lgain, lay.emissive_gain),
                                        ("KMTF", self._ltex, lay.texture_id)):
                if tag in lay.tracks:
                    target.add(bank, flat, lay.tracks[tag], static)
        for flat, slot in slot_tracks:
            if slot.texture_track is not None:
                self._stex.add(bank, flat, slot.texture_track, slot.texture_id)
        self.slot_layer = np.array(slot_layer, np.int64)
        self.slot_kind = np.array(slot_kind, np.int64)

    def _compile_texture_animations(self, model: Model, bank: TrackBank) -> None:
        """Texture animations."""
        nt = len(model.texture_animations)
        self._tat = _Scatter(np.zeros((nt, 3)))
        self._tar = _Scatter(np.tile(quat.IDENTITY, (nt, 1)))
        self._tas = _Scatter(np.ones((nt, 3)))
        for ti, ta in enumerate(model.texture_animations):
            for tag, target in (("KTAT", self._tat), ("KTAR", self._tar), ("KTAS", self._tas)):
                if tag in ta.tracks:
                    target.add(bank, ti, ta.tracks[tag])

    # ------------------------------------------------------------------------------------------

    def sequence_index(self, sequence) -> int | None:
        if sequence is None:
            return None
        if isinstance(sequence, Sequence):
            for i, s in enumerate(self.model.sequences):
                if s is sequence:
                    return i
            raise UnknownSequence(sequence.name, [s.name for s in self.model.sequences])
        return find_sequence(self.model, sequence)

    def clock(self, sequence, t_ms: float) -> Clock:
        i = self.sequence_index(sequence)
        seq = None if i is None else self.model.sequences[i]
        return make_clock(seq, t_ms, self.model.global_sequences)

    def node_matrices(self, clock: Clock, view=None, sampled=None) -> np.ndarray:
        sampled = self.bank.sample(clock) if sampled is None else sampled
        return self.skeleton.world_matrices(self._t.fill(sampled), self._r.fill(sampled), self._s.fill(sampled),
                                            view=view)

    def node_subset(self, rows) -> NodeSubset:
        """A poser of the skeleton rows `rows` and their ancestors only (see `NodeSubset`)."""
        return NodeSubset(self, rows)

    def pose(self, sequence, t_ms: float, view=None) -> Pose:
        """The pose of `sequence` (index, name, Sequence or None for no sequence) at `t_ms`.

        The last pose is kept with what decides it (`_pose_key`): a call that would compute the same
        arrays (a still frame drawn again, any time of a sequence in which nothing animates) shares
        them, with its own time and clock. Nothing writes into a pose's arrays (they are inputs of
        the frame's draws), so sharing them is as good as computing them again."""
        index = self.sequence_index(sequence)
        seq = None if index is None else self.model.sequences[index]
        clock = make_clock(seq, t_ms, self.model.global_sequences)
        key = self._pose_key(index, clock, view)
        last = self._last_pose
        if last is not None and last[0] == key:
            shared = Pose.__new__(Pose)  # dataclasses.replace, without re-running __init__ over every field
            shared.__dict__.update(last[1].__dict__, t_ms=float(t_ms), clock=clock)
            return shared
        pose = self._compute_pose(index, clock, view)
        self._last_pose = (key, pose)
        return pose

    def _pose_key(self, index: int | None, clock: Clock, view) -> tuple:
        """What a pose's arrays depend on: the sequence; the clock's times unless no track animates in
        its interval; the view's bytes when a billboarded or camera-anchored node reads it."""
        still = self._still.get(clock.interval)
        if still is None:
            still = self._still[clock.interval] = self.bank.still(clock.interval)
        times = None if still else \
            np.array((clock.frame, *clock.global_times), np.float64).tobytes()
        seen = None if not self.skeleton.track_rotation or view is None else \
            np.asarray(view, np.float64).tobytes()
        return index, clock.interval, times, self.skeleton.track_rotation and view is None, seen

    def _compute_pose(self, index: int | None, clock: Clock, view) -> Pose:
        sampled = self.bank.sample(clock)
        nodes = self.node_matrices(clock, view, sampled)
        vis = self._vis.fill(sampled)
        color = self._color.fill(sampled)
        if GEOA_TRACK_COLOR_BGR:
            color = color[:, ::-1].copy()
        uv = uv_matrices(self._tat.fill(sampled), self._tar.fill(sampled), self._tas.fill(sampled))
        att = np.append(vis, 1.0)[self.attachment_rows]  # an attachment whose id names no node: 1
        return Pose(
            sequence=index, t_ms=float(clock.t_ms), clock=clock, node_matrices=nodes, node_visibility=vis,
            geoset_alpha=self._alpha.fill(sampled), geoset_color=color,
            layer_alpha=self._lalpha.fill(sampled), layer_emissive_gain=self._lgain.fill(sampled),
            layer_texture_id=np.rint(self._ltex.fill(sampled)).astype(np.int64),
            slot_texture_id=np.rint(self._stex.fill(sampled)).astype(np.int64),
            uv_matrices=uv, attachment_visibility=att, palettes=self.palettes.build(nodes), skins=self.skins,
            layer_index=self.layer_index, slot_layer=self.slot_layer, slot_kind=self.slot_kind,
            notes=self.notes,
        )

    def poses(self, sequence, times, view=None) -> list[Pose]:
        return [self.pose(sequence, t, view) for t in times]


class NodeSubset:
    """World matrices of some nodes of an animator's model without posing the others: the rows asked
    for and their ancestors (`Skeleton.subset`), fed from the same sampled tracks through the same
    per-row operations, so each row is bit for bit its row of `Animator.node_matrices`; only their
    tracks are sampled (`TrackBank.subset`). The effects read only their emitters' rows, once per 20 ms
    step; a 100,000-node model cost 75 ms a step.

    `slot[row]` is the row of `world_matrices`' result that holds skeleton row `row`."""

    def __init__(self, animator: Animator, rows):
        self.skeleton = sk = animator.skeleton.subset(rows)
        self.slot = {int(r): j for j, r in enumerate(sk.source_rows.tolist())}
        scatters = [sc.subset(sk.source_rows) for sc in (animator._t, animator._r, animator._s)]
        used: dict[str, list] = {}
        for sc in scatters:
            for group, (_, src) in sc.parts.items():
                used.setdefault(group, []).append(src)
        keep = {g: np.unique(np.concatenate(v)) for g, v in used.items()}
        for sc in scatters:
            sc.rebase(keep)
        self._t, self._r, self._s = scatters
        self.bank = animator.bank.subset(keep)

    def world_matrices(self, clock: Clock, view=None) -> np.ndarray:
        """(len(subset), 4, 4) world matrices at `clock`, by subset row (see `slot`)."""
        sampled = self.bank.sample(clock)
        return self.skeleton.world_matrices(self._t.fill(sampled), self._r.fill(sampled), self._s.fill(sampled),
                                            view=view)


def pose_at(model: Model, sequence, t_ms: float, view=None) -> Pose:
    """One-off pose; use an Animator to pose the same model many times."""
    return Animator(model).pose(sequence, t_ms, view)
