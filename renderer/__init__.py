"""The renderer: a library with no knowledge of Celery, Redis or goldens.

A frame in five lines:

    from renderer import FrameSpec, Renderer, load_model, write_png
    model = load_model("Footman.mdx")
    with Renderer() as r:
        frame = r.render(model, FrameSpec(sequence="Stand", time_ms=500, width=256, height=256))
    write_png("footman.png", frame.rgba, frame.trace)

A model whose textures its loader finds (a Halo `.gbxmodel`) is drawn in the context it loaded with
(renderer.context): `model, context = load("cyborg.gbxmodel")`, then `r.render(model, spec,
context=context)`; `load_model` alone gives the model, for which the renderer derives the context its
path names, and refuses a Halo model rather than draw it in flat colours.

Importing this package loads no GL library; the context is created on the first render.
"""

from renderer.formats import load, load_model, save_model
from renderer.frame import Frame, FrameSpec, Renderer
from renderer.png import read_png, write_png

__all__ = ["Frame", "FrameSpec", "Renderer", "load", "load_model", "read_png", "save_model", "write_png"]
