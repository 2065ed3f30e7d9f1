"""The text `farm inspect` prints for a Halo model: `format_halo_info(model.info)`."""

from __future__ import annotations


def _v(xs, digits: int = 4) -> str:
    return "(" + ", ".join(f"{x:.{digits}g}" for x in xs) + ")"


def format_halo_info(info: dict, diagnostics=None) -> str:
    """Human-readable lines from a Halo model's `info` dict (and, optionally, its diagnostics)."""
    if not info:
        return "(no Halo model information)"
    lines = []
    ok = info.get("checksum_ok")
    ck = "ok" if ok else ("absent" if ok is None else "MISMATCH")
    lines.append(f"class {info.get('class')!r} version {info.get('version')} engine {info.get('engine')!r} "
                 f"checksum {info.get('checksum')} ({ck})")
    flags = info.get("flags") or []
    scale = _v(info.get("base_map_scale", ()))
    lines.append(f"flags: {', '.join(flags) if flags else 'none'}; base map scale {scale}; LOD {info.get('lod')}")
    cut = info.get("detail_cutoffs") or {}
    if cut:
        lines.append("detail cutoffs: " + ", ".join(f"{k} {v:g}" for k, v in cut.items()))
    nodes = info.get("nodes") or []
    lines.append(f"nodes ({len(nodes)}):")
    for n in nodes:
        lines.append(f"  {n['index']:3d} {n['name']!r} parent {n['parent']} t {_v(n['translation'])} "
                     f"q {_v(n['rotation'])}")
    markers = info.get("markers") or []
    if markers:
        named = ", ".join(f"{m['name']!r} x{len(m['instances'])}" for m in markers)
        lines.append(f"markers ({len(markers)}): {named}")
    regions = info.get("regions") or []
    lines.append(f"regions ({len(regions)}):")
    for r in regions:
        state = "not drawn" if not r["selected"] else f"permutation {r['chosen']} ({r['chosen_by']})"
        lines.append(f"  {r['index']:3d} {r['name']!r}: {state}")
        for p in r["permutations"]:
            mark = "*" if r["selected"] and p["index"] == r["chosen"] else " "
            lods = "/".join(str(v) for v in p["lods"].values())
            extra = f" markers {', '.join(repr(mk['name']) for mk in p['markers'])}" if p["markers"] else ""
            flags = f" [{', '.join(p['flags'])}]" if p["flags"] else ""
            lines.append(f"     {mark}{p['index']:3d} {p['name']!r} geometries (super high..super low) {lods}"
                         f"{extra}{flags}")
    sel = info.get("selected") or []
    lines.append("drawn:")
    for s in sel:
        if s.get("geometry") is None:
            lines.append(f"  {s['region_name']!r}/{s['permutation_name']!r}: nothing (no geometry)")
            continue
        shared = f" (shared with region {s['shared_with'][0]})" if s.get("shared_with") else ""
        lines.append(f"  {s['region_name']!r}/{s['permutation_name']!r}: geometry {s['geometry']} at {s['lod']}, "
                     f"geosets {s['geosets']}{shared}")
    geos = info.get("geometries") or []
    lines.append(f"geometries ({len(geos)}):")
    for g in geos:
        parts = g["parts"]
        v = sum(p["uncompressed_vertices"] or p["compressed_vertices"] for p in parts)
        t = sum(p["triangles"] for p in parts)
        lines.append(f"  {g['index']:3d}: {len(parts)} parts, {v} vertices, {t} triangles")
        for p in parts:
            local = f" local nodes {p['local_nodes']}" if p.get("local_nodes") else ""
            lines.append(f"       part {p['index']}: shader {p['shader']}, {p['uncompressed_vertices']} uncompressed + "
                         f"{p['compressed_vertices']} compressed vertices, {p['triangles']} triangles "
                         f"({p['strip_indices']} strip indices){local}")
    shaders = info.get("shaders") or []
    lines.append(f"shaders ({len(shaders)}):")
    for s in shaders:
        state = f"resolved {s['file']}" if s["resolved"] else f"MISSING, flat colour {tuple(s['flat_color'])}"
        base = f", base map {s['base_map']!r}" if s.get("base_map") else ""
        lines.append(f"  {s['index']:3d} [{s['class']}] {s['path']!r}: {state}; blend {s['blend']}{base}")
    textures = info.get("textures") or []
    lines.append(f"textures ({len(textures)}):")
    for t in textures:
        if t.get("file"):
            lines.append(f"  {t['index']:3d} {t['path']!r}: {t['width']}x{t['height']} {t['format']} ({t['type']})")
        else:
            lines.append(f"  {t['index']:3d} flat colour {tuple(t['flat_color'])}")
    if diagnostics:
        lines.append(f"diagnostics ({len(diagnostics)}):")
        for d in diagnostics:
            lines.append(f"  {d.sentence()}")
    return "\n".join(lines)
