"""Runs made by hand for the golden, report, serve and diff tests: a store with PNGs (carrying a
trace with a GL environment, as the renderer writes them) and a job file, no GL needed."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import numpy as np

from farm.plan.batches import Plan
from farm.run.jobs import JobState
from farm.store import FolderStore as Store
from renderer.png import png_bytes

LLVMPIPE = {"backend": "egl", "cpu_vendor": "AuthenticAMD", "driver": "Mesa", "driver_version": "22.3.6",
            "glsl_version": "4.50", "max_samples": 4, "platform": "surfaceless",
            "renderer": "llvmpipe (LLVM 15.0.6, 256 bits)", "vendor": "Mesa/X.org",
            "version": "4.5 (Core Profile) Mesa 22.3.6"}
INTEL = {**LLVMPIPE, "cpu_vendor": "GenuineIntel"}
NVIDIA = {"backend": "egl", "cpu_vendor": "GenuineIntel", "driver": "NVIDIA", "driver_version": "535.104.05",
          "glsl_version": "4.60 NVIDIA", "max_samples": 32, "platform": "device:/dev/dri/renderD128",
          "renderer": "NVIDIA GeForce RTX 3060/PCIe/SSE2", "vendor": "NVIDIA Corporation",
          "version": "4.6.0 NVIDIA 535.104.05"}


def key(model: str = "models/a.mdx", seq: str = "Stand", t: int = 0, size: int = 32) -> str:
    return f"{model}|{seq}|{t}ms|auto|{size}x{size}|msaa0|team0|transparent"


def image(seed: int = 0, size: int = 32, alpha: bool = False) -> np.ndarray:
    """A smooth picture with a few shapes (so SSIM means something), different per seed."""
    y, x = np.mgrid[0:size, 0:size].astype(np.float64)
    rgba = np.empty((size, size, 4), np.uint8)
    rgba[..., 0] = (128 + 100 * np.sin(x / 5 + seed)).astype(np.uint8)
    rgba[..., 1] = (128 + 100 * np.cos(y / 6 + 2 * seed)).astype(np.uint8)
    rgba[..., 2] = ((x + y) * 255 / (2 * size - 2)).astype(np.uint8)
    rgba[..., 3] = 255
    c = 8 + seed % 8
    rgba[c:c + 8, c:c + 8, :3] = (240, 240, 30)
    if alpha:
        rgba[:4, :, 3] = 0
    return rgba


def noisy(rgba: np.ndarray, amount: int = 1, seed: int = 1) -> np.ndarray:
    """The same picture with every channel nudged by up to `amount` (a different CPU's llvmpipe)."""
    rng = np.random.default_rng(seed)
    out = rgba.astype(np.int16) + rng.integers(-amount, amount + 1, rgba.shape)
    out[..., 3] = rgba[..., 3]
    return np.clip(out, 0, 255).astype(np.uint8)


def broken(rgba: np.ndarray) -> np.ndarray:
    """The picture with a large region wrong (a regression)."""
    out = rgba.copy()
    out[4:24, 4:24, :3] = 255 - out[4:24, 4:24, :3]
    return out


def make_run(root: str | Path, frames: dict, *, gl: dict | None = None, name: str = "t", job_id: str | None = None,
             thresholds: dict | None = None, model_hash: str = "m1", times: dict | None = None) -> JobState:
    """A finished run in store `root`: frames maps trace key -> RGBA (rendered), a str (the error
    of a frame that failed) or None (never rendered: pending). `times`: the ms of keys that name a
    fraction of the sequence ("50%"; the others' ms is in the key)."""
    gl = LLVMPIPE if gl is None else gl
    store = Store(root)
    traces = {}
    for k in frames:
        model, seq, t = k.split("|")[:3]
        ms = (times or {})[k] if t.endswith("%") else int(t[:-2])
        traces[k] = {"model": model, "sequence": seq, "time_ms": ms, "batch": "b0",
                     "thresholds": dict((thresholds or {}).get(k, {}))}
    manifest = SimpleNamespace(name=name, path=str(Path(root) / f"{name}.toml"), trace_thresholds=[])
    job = JobState.create(store, manifest, Plan([], traces, {}), job_id)
    for k, rgba in frames.items():
        t = job.traces[k]
        if rgba is None:
            continue
        if isinstance(rgba, str):
            t.update(status="failed", error=rgba)
            continue
        trace = {"key": k, "model_hash": model_hash, "gl": gl}
        digest = store.put_image(png_bytes(rgba, trace), {"trace": trace, "diagnostics": []})
        t.update(status="done", digest=digest)
    job.save(force=True)
    return job
