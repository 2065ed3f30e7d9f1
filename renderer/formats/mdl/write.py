"""Write a Model as MDL text, in the conventional block order."""

from __future__ import annotations

from renderer.model import Model

from . import header
from .geosets import write_geoset, write_geoset_animation
from .materials import write_materials
from .nodes import WRITE_ORDER, WRITE_ORDER_EMITTERS, write_nodes
from .text import Out


def write_mdl(model: Model) -> str:
    """The model as MDL text. What MDL cannot say (unknown chunks, ...) is left out, with a
    diagnostic appended to `model.diagnostics` (a detail field, so model equality is unaffected)."""
    out = Out()
    header.write_header(out, model)
    write_materials(out, model)
    v = model.version
    for i, g in enumerate(model.geosets):
        write_geoset(out, g, v, f"geoset {i}")
    for i, ga in enumerate(model.geoset_animations):
        write_geoset_animation(out, ga, v, f"geoset animation {i}")
    write_nodes(out, model, WRITE_ORDER)
    header.write_pivots(out, model)
    write_nodes(out, model, WRITE_ORDER_EMITTERS)
    header.write_tail(out, model)
    for chunk in model.unknown_chunks:
        out.raw(f"// unknown chunk {chunk.tag!r} ({len(chunk.data)} bytes) has no MDL form; left out\n")
        out.diag(f"chunk {chunk.tag}", f"unknown chunk {chunk.tag!r} ({len(chunk.data)} bytes) has no MDL form; "
                                       "left out of the MDL text")
    for d in out.diagnostics:
        if d not in model.diagnostics:
            model.diagnostics.append(d)
    return out.text()
