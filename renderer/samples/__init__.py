"""The project's own sample models, built in code and written with our own MDX writer.

They drive the demo, the README and the committed goldens, so a fresh clone works without any
third-party files. Each builder returns (model, {relative texture path: RGBA array}).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from .build import SAMPLES


def write_samples(out_dir: str | Path) -> list[Path]:
    """Write every sample model (MDX) and its textures (TGA) under out_dir; returns the model paths."""
    # the MDX writer, only when the samples are written
    from PIL import Image

    from renderer.formats.mdx import save_mdx

    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    written = []
    for name, builder in SAMPLES.items():
        model, textures = builder()
        for rel, rgba in textures.items():
            dest = out_dir / Path(*rel.split("\\"))
            dest.parent.mkdir(parents=True, exist_ok=True)
            Image.fromarray(np.ascontiguousarray(rgba, np.uint8), "RGBA").save(dest)
        path = out_dir / f"{name}.mdx"
        save_mdx(model, path)
        written.append(path)
    return written


__all__ = ["SAMPLES", "write_samples"]
