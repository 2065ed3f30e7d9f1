"""What `farm inspect` shows: a plain, JSON-ready summary of a loaded model with stable keys."""

from __future__ import annotations

from renderer import hd, rules
from renderer.model import Model, Node

NODE_TYPE_BITS = (
    (0x100, "Bone"), (0x200, "Light"), (0x400, "EventObject"), (0x800, "Attachment"),
    (0x1000, "ParticleEmitter"), (0x2000, "CollisionShape"), (0x4000, "RibbonEmitter"),
)
NODE_FLAG_NAMES = (
    (rules.NODE_FLAG_DONT_INHERIT_TRANSLATION, "DontInheritTranslation"),
    (rules.NODE_FLAG_DONT_INHERIT_ROTATION, "DontInheritRotation"),
    (rules.NODE_FLAG_DONT_INHERIT_SCALING, "DontInheritScaling"),
    (0x8, "Billboarded"), (0x10, "BillboardedLockX"), (0x20, "BillboardedLockY"), (0x40, "BillboardedLockZ"),
    (0x80, "CameraAnchored"),
)
EMITTER2_FLAG_NAMES = (
    (0x8000, "Unshaded"), (0x10000, "SortPrimsFarZ"), (0x20000, "LineEmitter"),
    (0x40000, "Unfogged"), (0x80000, "ModelSpace"), (0x100000, "XYQuad"),
)
EMITTER_FLAG_NAMES = ((0x8000, "EmitterUsesMDL"), (0x10000, "EmitterUsesTGA"))
LAYER_FLAG_NAMES = (
    (0x1, "Unshaded"), (0x2, "SphereEnvMap"), (0x4, "WrapWidth"), (0x8, "WrapHeight"), (0x10, "TwoSided"),
    (0x20, "Unfogged"), (0x40, "NoDepthTest"), (0x80, "NoDepthSet"), (0x100, "Unlit"),
)
HEAD_OR_TAIL = ("Head", "Tail", "Both")


def flag_names(value: int, table) -> list[str]:
    names = [name for bit, name in table if value & bit]
    known = 0
    for bit, _ in table:
        known |= bit
    if value & ~known:
        names.append(f"0x{value & ~known:x}")
    return names


def _node_flags(n: Node) -> list[str]:
    extra = {"ParticleEmitter": EMITTER_FLAG_NAMES, "ParticleEmitter2": EMITTER2_FLAG_NAMES}
    return flag_names(n.flags, NODE_FLAG_NAMES + NODE_TYPE_BITS + extra.get(type(n).__name__, ()))


def _filter_name(names, value: int) -> str:
    return names[value] if 0 <= value < len(names) else f"Invalid({value})"


def summarize(model: Model, chunks: list[tuple[str, int, int]] | None = None) -> dict:
    m = model
    out: dict = {
        "path": m.path,
        "format": m.format.upper(),
        "version": m.version,
        "name": str(m.name),
        "chunks": [{"tag": t, "offset": o, "size": s} for t, o, s in (chunks or [])],
        "sequences": [
            {"index": i, "name": str(s.name), "start": s.interval[0], "end": s.interval[1],
             "looping": not (s.flags & 1), "move_speed": s.move_speed}
            for i, s in enumerate(m.sequences)
        ],
        "global_sequences": list(m.global_sequences),
        "textures": [
            {"index": i, "path": str(t.path), "replaceable_id": t.replaceable_id,
             "wrap": flag_names(t.flags, ((1, "WrapWidth"), (2, "WrapHeight")))}
            for i, t in enumerate(m.textures)
        ],
        "materials": [
            {"index": i, "priority_plane": mat.priority_plane, "flags": mat.flags, "shader": str(mat.shader),
             "layers": [
                 {"filter_mode": _filter_name(rules.LAYER_FILTER_MODES, ly.filter_mode),
                  "texture_id": ly.texture_id, "coord_id": ly.coord_id, "alpha": ly.alpha,
                  "flags": flag_names(ly.shading_flags, LAYER_FLAG_NAMES),
                  "texture_slots": [[s.texture_id, s.slot] for s in ly.textures],
                  "tracks": list(ly.tracks)}
                 for ly in mat.layers
             ],
             "hd_slots": hd.hd_slot_table(m, i)}
            for i, mat in enumerate(m.materials)
        ],
        "geosets": [
            {"index": i, "vertices": len(g.vertices), "triangles": len(g.triangles), "uv_sets": len(g.uv_sets),
             "material_id": g.material_id, "matrix_groups": len(g.matrix_group_sizes),
             "skin": g.skin is not None, "tangents": g.tangents is not None, "lod": g.lod}
            for i, g in enumerate(m.geosets)
        ],
        "nodes": [
            {"object_id": n.object_id, "name": str(n.name), "type": type(n).__name__,
             "parent": n.parent_id, "flags": _node_flags(n), "tracks": list(n.node_tracks)}
            for n in sorted(m.nodes(), key=lambda n: n.object_id)
        ],
        "particle_emitters2": [
            {"name": str(e.name), "object_id": e.object_id,
             "filter_mode": _filter_name(rules.PRE2_FILTER_MODES, e.filter_mode),
             "head_or_tail": HEAD_OR_TAIL[e.head_or_tail] if 0 <= e.head_or_tail < 3 else f"Invalid({e.head_or_tail})",
             "rows": e.rows, "columns": e.columns, "texture_id": e.texture_id,
             "replaceable_id": e.replaceable_id, "squirt": bool(e.squirt), "tracks": list(e.tracks)}
            for e in m.particle_emitters2
        ],
        "ribbon_emitters": [
            {"name": str(e.name), "object_id": e.object_id, "material_id": e.material_id,
             "emission_rate": e.emission_rate, "lifespan": e.lifespan, "rows": e.rows, "columns": e.columns,
             "tracks": list(e.tracks)}
            for e in m.ribbon_emitters
        ],
        "event_objects": [
            {"name": str(e.name), "object_id": e.object_id,
             "frames": [] if e.frames is None else [int(f) for f in e.frames]}
            for e in m.event_objects
        ],
        "cameras": [str(c.name) for c in m.cameras],
        "unknown_chunks": [{"tag": c.tag, "size": len(c.data)} for c in m.unknown_chunks],
        "diagnostics": [d.as_dict() for d in m.diagnostics],
    }
    return out


def _texture_label(s: dict, tid) -> str:
    """'none', or the texture's index and its path (or replaceable id)."""
    if tid is None:
        return "none"
    if not 0 <= tid < len(s["textures"]):
        return f"{tid} (out of range)"
    t = s["textures"][tid]
    return f"{tid} {t['path']!r}" if t["path"] else f"{tid} replaceable {t['replaceable_id']}"


def format_text(s: dict) -> str:
    """The human-readable form of `summarize`'s dict."""
    lines = [f"{s['path']}: {s['format']} version {s['version']}, model {s['name']!r}"]
    if s["chunks"]:
        lines.append("chunks: " + ", ".join(f"{c['tag']} {c['size']}" for c in s["chunks"]))
    lines.append(f"sequences ({len(s['sequences'])}):")
    for q in s["sequences"]:
        loop = "" if q["looping"] else " non-looping"
        lines.append(f"  {q['index']:3d} {q['name']!r} [{q['start']}, {q['end']}]{loop}")
    if s["global_sequences"]:
        lines.append(f"global sequences: {s['global_sequences']}")
    lines.append(f"textures ({len(s['textures'])}):")
    for t in s["textures"]:
        rep = f" replaceable {t['replaceable_id']}" if t["replaceable_id"] else ""
        lines.append(f"  {t['index']:3d} {t['path']!r}{rep} {' '.join(t['wrap'])}".rstrip())
    lines.append(f"materials ({len(s['materials'])}):")
    for mat in s["materials"]:
        shader = f" shader {mat['shader']!r}" if mat["shader"] else ""
        lines.append(f"  {mat['index']:3d} priority {mat['priority_plane']}{shader}")
        for j, ly in enumerate(mat["layers"]):
            extra = " ".join(ly["flags"] + ly["tracks"])
            slots = f" slots {ly['texture_slots']}" if ly["texture_slots"] else ""
            lines.append(f"      layer {j}: {ly['filter_mode']} texture {ly['texture_id']} uv {ly['coord_id']} "
                         f"alpha {ly['alpha']:g}{slots} {extra}".rstrip())
        for row in mat.get("hd_slots", []):
            named = ", ".join(f"{k} {_texture_label(s, row[k])}" for k in rules.HD_SLOTS)
            lines.append(f"      HD layer {row['layer']}: {named}")
    lines.append(f"geosets ({len(s['geosets'])}):")
    for g in s["geosets"]:
        skin = " SKIN" if g["skin"] else f" {g['matrix_groups']} matrix groups"
        lines.append(f"  {g['index']:3d} {g['vertices']} vertices, {g['triangles']} triangles, "
                     f"{g['uv_sets']} UV sets, material {g['material_id']}{skin}")
    lines.append(f"nodes ({len(s['nodes'])}):")
    for n in s["nodes"]:
        flags = " ".join(f for f in n["flags"] if f not in dict(NODE_TYPE_BITS).values())
        lines.append(f"  {n['object_id']:3d} {n['type']:<16} {n['name']!r} parent {n['parent']} {flags}".rstrip())
    if s["particle_emitters2"]:
        lines.append(f"particle emitters 2 ({len(s['particle_emitters2'])}):")
        for e in s["particle_emitters2"]:
            lines.append(f"  {e['name']!r}: {e['filter_mode']}, {e['head_or_tail']}, {e['rows']}x{e['columns']} "
                         f"cells, texture {e['texture_id']}{' squirt' if e['squirt'] else ''}")
    if s["ribbon_emitters"]:
        lines.append(f"ribbon emitters ({len(s['ribbon_emitters'])}):")
        for e in s["ribbon_emitters"]:
            lines.append(f"  {e['name']!r}: material {e['material_id']}, {e['emission_rate']}/s, "
                         f"life {e['lifespan']:g} s, {e['rows']}x{e['columns']} cells")
    if s["event_objects"]:
        lines.append(f"event objects ({len(s['event_objects'])}):")
        for e in s["event_objects"]:
            lines.append(f"  {e['name']!r}: frames {e['frames'][:12]}{' ...' if len(e['frames']) > 12 else ''}")
    if s["cameras"]:
        lines.append(f"cameras: {', '.join(repr(c) for c in s['cameras'])}")
    lines.append(f"diagnostics ({len(s['diagnostics'])}):")
    for d in s["diagnostics"]:
        at = f" at {d['unit']} {d['offset']}" if d["offset"] is not None else ""
        lines.append(f"  {d['where']}{at}: {d['message']}")
    return "\n".join(lines)
