"""EVTS event objects: what each event code names (the game's SLK tables) and what it draws.

An event object's name says what it does: the first three characters are the kind (SPN spawn a
model, SPL / FPT a terrain splat or footprint, UBR an uber-splat, SND a sound), the last four the
row id in that kind's table, found like a texture (the model's folder and those above it, the asset
roots, game data): `Splats\\SpawnData.slk`, `Splats\\SplatData.slk`, `Splats\\UberSplatData.slk`,
`UI\\SoundInfo\\AnimSounds.slk`. Without the table (or the row) an event is a diagnostic and draws
nothing.

Drawn (FrameSpec.events = "model"; off by default, see `renderer.rules.EVENTS_MODES`), for every
KEVT frame f of the playing sequence with start <= f <= the clock's frame (a global sequence's own
time for events driven by one), at age = frame - f:

- SPN: the table's model, at the event node's world pivot, playing its first sequence at `age`
  while age < that sequence's length (1 s without one), with its own particles and ribbons from the
  moment of the event (seeded from the event and its frame); its own events are not run, nor its
  children's emitters (one level, which bounds the work).
- SPL / FPT: a square on the ground plane (z = 0) under the node, half-size `Scale`, textured with
  `Dir\\file` (.blp), colour and alpha from Start* to Middle* over `Lifespan` seconds, then to End*
  over `Decay`; gone after both.
- UBR: a square the same way, alpha 0 -> 1 over `BirthTime`, 1 for `PauseTime`, 1 -> 0 over `Decay`.
- SND: nothing to draw.

Blend modes (`BlendMode` column): 0 Blend, 1 Additive, 2 Modulate, 3 Modulate2x, 4 AddAlpha.
Everything follows from the clock, so batches equal separate renders.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from types import SimpleNamespace

import numpy as np

from renderer import blending
from renderer.fx.ribbons import VERTEX_FLOATS
from renderer.model import Texture

__all__ = ["KINDS", "TABLES", "EventTables", "fired_events", "parse_slk", "resolve_events", "split_name", "target"]

KINDS = {"SPN": "spawn", "SPL": "splat", "FPT": "splat", "UBR": "ubersplat", "SND": "sound"}
TABLES = {"spawn": "Splats\\SpawnData.slk", "splat": "Splats\\SplatData.slk",
          "ubersplat": "Splats\\UberSplatData.slk", "sound": "UI\\SoundInfo\\AnimSounds.slk"}
BLEND_TO_FILTER = {0: 2, 1: 3, 2: 5, 3: 6, 4: 4}  # SLK BlendMode -> layer filter mode (renderer.blending)
SPAWN_WITHOUT_SEQUENCE_MS = 1000.0


def parse_slk(text: str) -> list[dict[str, str]]:
    """The rows of a SYLK table as dicts keyed by the first row's cells (the header). Cells are
    `C;X<col>;Y<row>;K<value>` records (Y may be left out: the row goes on); quotes are stripped."""
    cells: dict[int, dict[int, str]] = {}
    row = col = 0
    for line in text.splitlines():
        if not line.startswith("C;"):
            continue
        fields = line[2:].split(";")
        value = None
        for f in fields:
            if f.startswith("X") and f[1:].isdigit():
                col = int(f[1:])
            elif f.startswith("Y") and f[1:].isdigit():
                row = int(f[1:])
            elif f.startswith("K"):
                value = ";".join(fields[fields.index(f):])[1:]
                break
        if value is None:
            continue
        if len(value) >= 2 and value[0] == value[-1] == '"':
            value = value[1:-1]
        cells.setdefault(row, {})[col] = value
    if not cells:
        return []
    rows = sorted(cells)
    header = cells[rows[0]]
    return [{header[c]: v for c, v in cells[r].items() if c in header} for r in rows[1:]]


def split_name(name: str) -> tuple[str | None, str]:
    """(kind, row id) of an event object's name: SPNxUEGB -> ("spawn", "UEGB"); kind None when unknown."""
    name = str(name)
    return KINDS.get(name[:3].upper()), name[-4:] if len(name) >= 7 else ""


class EventTables:
    """The SLK tables an event needs, read once through a model's asset search."""

    def __init__(self, search):
        self.search = search
        self._tables: dict[str, dict[str, dict] | None] = {}

    def table(self, kind: str) -> dict[str, dict] | None:
        if kind not in self._tables:
            found = self.search.find(TABLES[kind], kind="event table") if self.search is not None else None
            if found is None:
                self._tables[kind] = None
            else:
                rows = parse_slk(found.data.decode("utf-8", "replace"))
                key = next(iter(rows[0])) if rows else None
                self._tables[kind] = {str(r.get(key, "")).upper(): r for r in rows}
        return self._tables[kind]

    def row(self, kind: str, ident: str) -> tuple[dict | None, str]:
        """(the table row, or None, and why not)."""
        table = self.table(kind)
        if table is None:
            return None, f"no {TABLES[kind]} in the model's folders, the asset roots or the game data"
        row = table.get(ident.upper())
        return (row, "") if row is not None else (None, f"{TABLES[kind]} has no row {ident!r}")


def resolve_events(model, search) -> list[dict]:
    """What each event object of `model` resolves to (for `farm inspect`)."""
    tables = EventTables(search)
    out = []
    for e in model.event_objects:
        kind, ident = split_name(e.name)
        entry = {"name": str(e.name), "kind": kind, "id": ident, "frames": int(len(e.frames)) if e.frames is not None
                 else 0}
        if kind is None:
            entry["resolved"] = None
            entry["why"] = f"unknown event kind {str(e.name)[:3]!r} (known: {', '.join(sorted(KINDS))})"
        else:
            row, why = tables.row(kind, ident)
            entry["resolved"] = target(kind, row) if row is not None else None
            if row is None:
                entry["why"] = why
        out.append(entry)
    return out


def target(kind: str, row: dict) -> str:
    if kind == "spawn":
        return str(row.get("Model", ""))
    if kind in ("splat", "ubersplat"):
        return f"{row.get('Dir', '')}\\{row.get('file', '')}.blp".lstrip("\\")
    return str(row.get("FileNames", "") or row.get("Name", ""))


def _num(row: dict, key: str, default: float = 0.0) -> float:
    try:
        return float(row.get(key, default))
    except (TypeError, ValueError):
        return default


@dataclass
class Fired:
    index: int  # the event object's index in model.event_objects
    kind: str
    ident: str
    frame: float  # the KEVT frame that fired
    age_ms: float


def fired_events(model, pose) -> list[Fired]:
    """The events that have fired and may still show at this pose's clock, with their ages."""
    out = []
    clock = pose.clock
    for i, e in enumerate(model.event_objects):
        kind, ident = split_name(e.name)
        if kind is None or e.frames is None or not len(e.frames):
            continue
        gs = int(e.global_sequence_id)
        if gs >= 0:
            if gs >= len(clock.global_times):
                continue
            now, lo = float(clock.global_times[gs]), 0.0
        elif clock.interval is None:
            continue
        else:
            now, lo = float(clock.frame), float(clock.interval[0])
        for f in np.asarray(e.frames, np.float64):
            if lo <= f <= now:
                out.append(Fired(i, kind, ident, float(f), now - float(f)))
    return out


def _alpha_ramp(row: dict, kind: str, age_s: float) -> tuple[np.ndarray, float] | None:
    """(RGB 0..1, alpha 0..1) of a splat at `age_s`, or None once it is gone."""
    if kind == "ubersplat":
        birth, pause, decay = (_num(row, k) for k in ("BirthTime", "PauseTime", "Decay"))
        if age_s < birth:
            a = age_s / birth if birth > 0 else 1.0
        elif age_s < birth + pause:
            a = 1.0
        elif age_s < birth + pause + decay:
            a = 1.0 - (age_s - birth - pause) / decay
        else:
            return None
        return np.ones(3), float(a)
    life, decay = _num(row, "Lifespan"), _num(row, "Decay")

    def rgba(prefix):
        return np.array([_num(row, f"{prefix}{c}", 255.0) for c in "RGBA"]) / 255.0

    start, mid, end = rgba("Start"), rgba("Middle"), rgba("End")
    if age_s < life:
        c = start + (mid - start) * (age_s / life if life > 0 else 1.0)
    elif age_s < life + decay:
        c = mid + (end - mid) * ((age_s - life) / decay)
    else:
        return None
    return c[:3], float(c[3])


def draw_events(gpu, pose, draw, res) -> dict:
    """Draw the fired events of `gpu.model` (see the module docstring) with `draw` (a
    renderer.scene.FrameDraw with its `effects` programs); `res` is the model's EffectResources
    (textures, spawned models). Returns counts."""
    from renderer.fx.draw import PlacedCamera, child_seed, draw_effects  # the effects pass, for spawned models
    from renderer.scene import draw_model

    model = gpu.model
    stats = {"spawned": 0, "splats": 0}
    if not model.event_objects:
        return stats
    tables = getattr(gpu, "event_tables", None)
    if tables is None:
        tables = gpu.event_tables = EventTables(getattr(gpu, "search", None))
    skeleton = gpu.animator.skeleton
    camera, spec, programs = draw.camera, draw.spec, draw.effects
    view, projection = camera.view(), camera.projection(draw.aspect)
    splats = []  # (verts, texture, state, rgba)
    for ev in fired_events(model, pose):
        e = model.event_objects[ev.index]
        where = f"EVTS {ev.index} ({e.name})"
        row, why = tables.row(ev.kind, ev.ident)
        if row is None:
            res._note(("event", ev.index), where, f"event {e.name!r}: {why}; nothing drawn")
            continue
        r = skeleton.index.get(int(e.object_id))
        world = pose.node_matrices[r] if r is not None else np.eye(4)
        oid = int(e.object_id)
        pivot = np.asarray(model.pivots[oid], np.float64) if 0 <= oid < len(model.pivots) else np.zeros(3)
        at = (world @ np.append(pivot, 1.0))[:3]
        if ev.kind == "spawn":
            ref = SimpleNamespace(index=("event", ev.index), record=SimpleNamespace(path=target("spawn", row)))
            child = res.child(ref)
            if child is None:
                continue
            seq = 0 if child.model.sequences else None
            length = (float(child.model.sequences[0].interval[1] - child.model.sequences[0].interval[0])
                      if seq is not None else SPAWN_WITHOUT_SEQUENCE_MS)
            if ev.age_ms >= length:
                continue
            local = child.animator.pose(seq, ev.age_ms, view)
            place = np.eye(4)
            place[:3, 3] = at
            cpose = dataclasses.replace(local, palettes=[np.einsum("ij,njk->nik", place, p) for p in local.palettes])
            draw_model(child, cpose, dataclasses.replace(draw, lights=None))
            stats["spawned"] += 1
            own = res.child_effects(ref, child)
            if own is not None:  # its particles and ribbons, from the moment of the event, seeded by it
                effects, digest = own
                placed = PlacedCamera(camera, place)
                csim = effects.at(child.model, child.animator, seq, ev.age_ms,
                                  # emitter index 2^20 + i: an event, never one of the model's PREM emitters
                                  child_seed(spec.instance_seed, 1 << 20 | ev.index, int(ev.frame)), digest,
                                  placed.view())
                if csim is not None:
                    draw_effects(csim, child, local, dataclasses.replace(draw, camera=placed), depth=1)
        elif ev.kind in ("splat", "ubersplat"):
            splat = _splat(ev, row, at, res, where)
            if splat is not None:
                splats.append(splat)
        # SND: nothing to draw
    if splats:
        programs.upload_ribbons(np.concatenate([v for v, _, _ in splats]))
        programs.begin_ribbons(view, projection)
        for i, (_v, tex, state) in enumerate(splats):
            programs.draw_ribbon(4 * i, 4, tex, state, (1.0, 1.0, 1.0, 1.0), np.eye(3), 1.0, True, False)
            stats["splats"] += 1
        programs.end()
    return stats


def _splat(ev, row, at, res, where: str):
    """A splat's quad on the ground under `at` at the event's age: (vertices, texture, GL state), or
    None once its alpha ramp has ended."""
    look = _alpha_ramp(row, ev.kind, ev.age_ms / 1000.0)
    if look is None:
        return None
    rgb, alpha = look
    half = _num(row, "Scale", 50.0)
    x0, x1, y0, y1 = at[0] - half, at[0] + half, at[1] - half, at[1] + half
    verts = np.zeros((4, VERTEX_FLOATS), np.float32)
    verts[:, 0:3] = [(x0, y0, 0.0), (x0, y1, 0.0), (x1, y0, 0.0), (x1, y1, 0.0)]
    verts[:, 3:6] = rgb
    verts[:, 6] = alpha
    verts[:, 7] = [0.0, 0.0, 1.0, 1.0]
    verts[:, 8] = [0.0, 1.0, 0.0, 1.0]
    tex = res._load(("event", ev.index), Texture(path=target(ev.kind, row)), where)
    mode = BLEND_TO_FILTER.get(int(_num(row, "BlendMode", 0.0)), 2)
    return verts, tex, blending.layer_state(mode)
