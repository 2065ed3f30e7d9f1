"""Inputs that travel with a job, for workers that cannot see its files.

Where the files are decides the shape (docker/README.md, "Several machines"):

- one host, or hosts that share a folder (NFS) holding the store and the asset tree at the same
  paths: workers open the models and textures by the paths the coordinator saw (`shared`);
- hosts that share only an object store: the inputs travel (`travel`). Before a job's batches are
  sent, `publish` resolves each model's inputs where the files are (renderer.inputs.model_inputs:
  the model's bytes and every asset the search finds for it: textures, tables, Halo tags, PREM
  children, archive entries) and puts them in the store under their sha256 (`Store.put_input`: once;
  a second night finds them there), with the pinned answers as one more input, whose sha256 the
  batch carries (`Batch.inputs`). A worker (`read_batch_model`) fetches what it needs through its
  bounded cache (farm.run.input_cache) and renders from them: the same pixels and the same asset
  record as where the files are (renderer.assets.pins). Game data stays where it is: a worker uses
  its own FARM_GAME_DIR (else the job's game data, when the path is there too); what it cannot find
  is a missing asset, as always.

FARM_INPUTS picks: `auto` (the default: travel when the store is a URL, s3://...), `travel` or `shared`.
"""

from __future__ import annotations

import json
import time

from farm.environment import default_game, env_str
from farm.files import json_bytes
from farm.plan.batches import Batch, read_model_and_digest
from farm.run.input_cache import InputCache
from farm.settings import SettingError, check_mode
from farm.store import is_url
from renderer.assets.pins import Pins
from renderer.assets.sources import read_source
from renderer.errors import FormatError
from renderer.formats import read_model, source_label
from renderer.frame import texture_settings
from renderer.inputs import model_inputs

__all__ = ["INPUT_MODES", "publish", "read_batch_model", "travels"]

INPUT_MODES = ("auto", "travel", "shared")


def travels(store, mode: str | None = None) -> bool:
    """Whether a job's inputs travel with it to this store: `mode` (else FARM_INPUTS) travel or shared,
    auto: when the store is not a folder (an object store)."""
    mode = mode or env_str("FARM_INPUTS") or "auto"
    check_mode(mode, "FARM_INPUTS", INPUT_MODES)
    return mode == "travel" or (mode == "auto" and is_url(store.location))


def publish(batches: list[Batch], store) -> dict:
    """Give every batch its inputs in the store (see the module docstring); batches that carry them
    already (a retry), whose model did not load when planned, or that cannot be read now (their
    frames fail on the worker, naming the file) are left as they are. Returns what it cost: models
    resolved, inputs put, their bytes, seconds."""
    done: dict[tuple, str | None] = {}
    cost = {"models": 0, "inputs": 0, "bytes": 0, "seconds": 0.0}
    started = time.monotonic()
    for b in batches:
        if b.inputs or b.model_digest is None:
            continue
        spec = b.frame_spec(None, 0)
        settings = texture_settings(spec)
        key = (b.model, settings, spec.events)
        if key not in done:
            try:
                done[key] = _publish_model(b.model, settings, spec.events, store, cost)
            except FormatError:  # gone or broken since it was planned: its worker says so for its frames
                done[key] = None
        b.inputs = done[key]
    cost["seconds"] = round(time.monotonic() - started, 3)
    return cost


def _publish_model(source: str, settings, events: str, store, cost: dict) -> str:
    data = read_source(source)
    model = read_model(data, source_label(source))
    found = model_inputs(model, settings, events)
    digest = store.put_input(data)
    for _sha, blob in sorted(found.blobs.items()):
        store.put_input(blob)
        cost["bytes"] += len(blob)
    doc = {**Pins(found.answers, _no_fetch).to_dict(), "model": digest}
    cost["models"] += 1
    cost["inputs"] += len(found.blobs) + 2
    cost["bytes"] += len(data)
    return store.put_input(json_bytes(doc))


def _no_fetch(digest: str) -> bytes:
    raise AssertionError("the coordinator's pins are written, never read")


def read_batch_model(batch: Batch, store, cache: InputCache | None = None):
    """(the batch's model, the sha256 of its bytes): from its travelling inputs when it has them
    (through the worker's cache, the answers pinned on the model), else from its file."""
    if not batch.inputs:
        return read_model_and_digest(batch.model)
    cache = cache or InputCache.from_env()

    def fetch(digest: str) -> bytes:
        return cache.get(digest, store.read_input)

    try:
        doc = json.loads(fetch(batch.inputs))
        pins = Pins.from_dict(doc, fetch, game=_worker_game(batch))
        data = fetch(doc["model"])
    except (ValueError, KeyError, TypeError) as e:
        raise FormatError(batch.model_rel, "inputs", None, f"the job's inputs cannot be read ({e})") from e
    name = source_label(batch.model)
    model = read_model(data, name, resolver=pins.tags(name))
    model.pins = pins
    return model, doc["model"]


def _worker_game(batch: Batch) -> tuple:
    """Game data where this worker is: its FARM_GAME_DIR, else the job's (when the paths are here too)."""
    try:
        return default_game() or batch.settings.game
    except SettingError:
        return batch.settings.game

