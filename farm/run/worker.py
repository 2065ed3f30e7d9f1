"""Per-process renderer lifecycle: one renderer, owning one GL context, per worker process.

Both runners use this module the same way, in each worker process and never in a parent:

1. `init_process(concurrency)` when the process starts (Celery's ``worker_process_init``, the
   local pool's initializer): sets ``LP_NUM_THREADS`` to cores // concurrency (unless the
   environment already sets it) *before* any GL library loads, then creates the renderer and its
   GL context at once, so a broken GL setup shows in the worker's log at start-up, and logs
   GL_RENDERER, the Mesa version and GL_MAX_SAMPLES. When the context cannot be created there, the
   process stays up and `get_renderer` tries again on the first batch (which then fails with
   `TransientError` and is retried, preferably by another worker).
2. `get_renderer()` for every batch: the process's renderer.
3. `shutdown_process()` on exit: frees GPU resources and releases the context (never
   ``eglTerminate``; see renderer.gl.context).

The parent (the Celery main process, `farm run`) never imports GL: importing this module loads
nothing from renderer.gl.

``FARM_RENDERER`` picks the renderer: ``gl`` (default, `renderer.frame.Renderer` with the backend
named by ``FARM_GL_BACKEND``, default ``auto``), ``module:factory`` (a zero-argument callable that
returns an object with ``render``/``forget``/``close``/``gl_info``), or ``synthetic``, a stand-in
with no GL that draws a deterministic pattern from the trace. The stand-in exercises the whole
farm (loading, store, brokers, retries) without a renderer, and measures the farm's own overhead
per frame in bench/farm.py; ``FARM_SYNTHETIC_DELAY_MS`` makes each of its frames take that long.
"""

from __future__ import annotations

import hashlib
import importlib
import json
import logging
import os
import time
from pathlib import Path

import numpy as np

from farm.environment import RENDERERS, check_renderer, default_game, env_str
from farm.run.budget import Budgets, limit_memory
from farm.run.sandbox import untrusted
from farm.settings import SettingError
from renderer.frame import Frame, Renderer, model_hash
from renderer.gl.threads import llvmpipe_threads, set_llvmpipe_threads

__all__ = [
    "RENDERERS",
    "SyntheticRenderer",
    "configure_threads",
    "get_renderer",
    "init_process",
    "renderer_kind",
    "shutdown_process",
]

log = logging.getLogger("farm.run.worker")

_state: dict = {"renderer": None, "kind": None, "pid": None}
_USER_LP = "LP_NUM_THREADS" in os.environ  # set by the user before this process started: respected


def renderer_kind(kind: str | None = None) -> str:
    """FARM_RENDERER (or `kind`), checked by farm.environment.check_renderer (ValueError here, in a
    worker; the command line checks it before anything starts)."""
    try:
        return check_renderer(kind or env_str("FARM_RENDERER"))
    except SettingError as e:
        raise ValueError(str(e)) from None


def configure_threads(concurrency: int) -> int:
    """LP_NUM_THREADS for this process: kept when the user set it, else cores // concurrency."""
    if _USER_LP and os.environ.get("LP_NUM_THREADS", "").isdigit():
        return int(os.environ["LP_NUM_THREADS"])
    return set_llvmpipe_threads(llvmpipe_threads(max(1, int(concurrency))))


def _create(kind: str):
    if ":" in kind:  # module:factory, a zero-argument callable returning a renderer
        module, _, attr = kind.partition(":")
        factory = importlib.import_module(module)
        for part in attr.split("."):
            factory = getattr(factory, part)
        return factory()
    if kind == "synthetic":
        return SyntheticRenderer(float(env_str("FARM_SYNTHETIC_DELAY_MS")))
    # Game data as this worker host has it (FARM_GAME_DIR): searched last, after a job's own game data.
    return Renderer(env_str("FARM_GL_BACKEND"), game=default_game())


def init_process(concurrency: int, kind: str | None = None, eager: bool = True) -> None:
    """Set up this worker process: thread count first, the memory budget (farm.run.budget), then
    (eagerly) the renderer and its context."""
    kind = renderer_kind(kind)
    _state.update(kind=kind, pid=os.getpid(), renderer=None)
    cap = limit_memory(Budgets.from_env().memory_mib)
    if cap is not None:
        log.info("pid %s: memory limit %d MiB (FARM_MEMORY_LIMIT_MB)", os.getpid(), cap >> 20)
    try:
        threads = configure_threads(concurrency)
    except (RuntimeError, ValueError) as e:  # too late (a driver is loaded) or a bad value: say so, go on
        log.warning("pid %s: LP_NUM_THREADS not set: %s", os.getpid(), e)
        threads = os.environ.get("LP_NUM_THREADS")
    if not eager or untrusted():  # FARM_UNTRUSTED: GL only in each batch's confined child (farm.run.sandbox)
        return
    try:
        renderer = get_renderer()
        info = renderer.gl_info()
    except Exception as e:  # noqa: BLE001 - logged; the first batch tries again and retries elsewhere
        log.warning("pid %s: no renderer yet (%s: %s); the first batch will try again", os.getpid(),
                    type(e).__name__, e)
        _state["renderer"] = None
        return
    log.info("pid %s: renderer %s ready, LP_NUM_THREADS=%s, GL %s", os.getpid(), kind, threads,
             json.dumps(info, sort_keys=True))


def get_renderer():
    """This process's renderer, created on first use (never shared with another process)."""
    if _state["pid"] != os.getpid():  # a process that did not run init_process (or was forked)
        _state.update(renderer=None, kind=renderer_kind(), pid=os.getpid())
    if _state["renderer"] is None:
        renderer = _create(_state["kind"] or renderer_kind())
        if hasattr(renderer, "context"):
            renderer.context  # noqa: B018 - create the GL context now, in this process
        _state["renderer"] = renderer
    return _state["renderer"]


def shutdown_process() -> None:
    renderer = _state.get("renderer")
    _state["renderer"] = None
    if renderer is not None and _state.get("pid") == os.getpid():
        try:
            renderer.close()
        except Exception as e:  # noqa: BLE001
            log.warning("pid %s: closing the renderer failed: %s", os.getpid(), e)


class SyntheticRenderer:
    """A stand-in for renderer.frame.Renderer with no GL: pixels are a pattern derived from the trace,
    so the same trace always gives the same bytes and different traces give different ones."""

    VERSION = "synthetic-1"

    def __init__(self, delay_ms: float = 0.0):
        self.delay_ms = float(delay_ms)

    def gl_info(self) -> dict:
        return {"renderer": "synthetic", "version": self.VERSION}

    def render(self, model, spec, model_digest: str | None = None):
        if self.delay_ms:
            time.sleep(self.delay_ms / 1000.0)
        seq = spec.sequence
        trace = {
            "renderer_version": self.VERSION,
            "model": Path(model.path).name if model.path else str(model.name),
            "model_hash": model_digest or model_hash(model),
            "sequence": None if seq is None else str(model.sequences[seq].name),
            "sequence_index": seq,
            "time_ms": int(spec.time_ms),
            "camera": spec.camera,
            "size": [spec.width, spec.height],
            "msaa_requested": spec.msaa,
            "msaa": spec.msaa,
            "team": spec.team,
            "background": spec.background,
            "missing_textures": spec.missing_textures,
            "gl": self.gl_info(),
        }
        seed = hashlib.sha256(json.dumps(trace, sort_keys=True).encode()).digest()
        y, x = np.mgrid[0:spec.height, 0:spec.width]
        rgba = np.empty((spec.height, spec.width, 4), np.uint8)
        rgba[..., 0] = (x * 255 // max(spec.width - 1, 1) + seed[0]) % 256
        rgba[..., 1] = (y * 255 // max(spec.height - 1, 1) + seed[1]) % 256
        rgba[..., 2] = (x ^ y ^ seed[2]) % 256
        rgba[..., 3] = 255
        return Frame(rgba, trace, list(getattr(model, "diagnostics", [])))

    def forget(self, model) -> None:
        pass

    def close(self) -> None:
        pass
