"""Inputs that travel with a job, for workers that cannot see its files.

Where the files are decides the shape (docker/README.md, "Several machines"):

- one host, or hosts that share a folder (NFS) holding the store and the asset tree at the same
  paths: workers open the models and textures by the paths the coordinator saw (`shared`);
- hosts that share only an object store: the inputs travel (`travel`). Before a job's batches are
  sent, `publish` resolves each model's inputs where the files are (renderer.inputs.model_inputs:
  the model's bytes and every asset the search finds for it: textures, tables, Halo tags, PREM
  children, archive entries) and puts them in the store under their sha256 (`Store.put_input`: once;
  a second night finds them there), with the pinned answers as one more input, whose sha256 the
  batch carries (`Batch.inputs`); a job planned in this process has them published as planning reads
  each model (`Publisher`), from that one read. A worker (`read_batch_model`) fetches what it needs through its
  bounded cache (farm.run.input_cache) and renders from them: the same pixels and the same asset
  record as where the files are (renderer.assets.pins). Game data stays where it is: a worker uses
  its own FARM_GAME_DIR (else the job's game data, when the path is there too); what it cannot find
  is a missing asset, as always.

FARM_INPUTS picks: `auto` (the default: travel when the store is a URL, s3://...), `travel` or `shared`.
"""

from __future__ import annotations

import dataclasses
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
from renderer.context import Loaded
from renderer.errors import FormatError
from renderer.formats import read, source_label
from renderer.frame import texture_settings
from renderer.inputs import model_inputs

__all__ = ["INPUT_MODES", "Publisher", "publish", "read_batch_model", "travels"]

INPUT_MODES = ("auto", "travel", "shared")


def travels(store, mode: str | None = None) -> bool:
    """Whether a job's inputs travel with it to this store: `mode` (else FARM_INPUTS) travel or shared,
    auto: when the store is not a folder (an object store)."""
    mode = mode or env_str("FARM_INPUTS") or "auto"
    check_mode(mode, "FARM_INPUTS", INPUT_MODES)
    return mode == "travel" or (mode == "auto" and is_url(store.location))


def publish(batches: list[Batch], store) -> dict:
    """Give every batch its inputs in the store (`Publisher.give`); returns what it cost."""
    publisher = Publisher(store)
    publisher.give(batches)
    return publisher.cost


class Publisher:
    """Puts jobs' inputs in a store (see the module docstring): once per model, texture settings and
    events, and, for models planning reads (`read` as its loader, `planned` as its hook:
    farm.plan.batches.expand_plan), from that one read of each model. `cost`: models resolved,
    inputs put, their bytes, seconds."""

    def __init__(self, store):
        self.store = store
        self.done: dict[tuple, str | None] = {}
        self.cost = {"models": 0, "inputs": 0, "bytes": 0, "seconds": 0.0}
        self._read: tuple[str, Loaded, bytes] | None = None  # the model planning read last

    def read(self, source: str) -> Loaded:
        """A planning loader (farm.plan.batches.read_model's read) that keeps the model's bytes until
        `planned` has published them."""
        self._read = None
        data = read_source(source)
        loaded = read(data, source_label(source), strict=False)
        self._read = (source, loaded, data)
        return loaded

    def planned(self, batches: list[Batch], loaded: Loaded) -> None:
        """Planning's hook: the batches of the model it just read, given their inputs from that read."""
        kept, self._read = self._read, None
        data = kept[2] if kept is not None and kept[1] is loaded else None
        self.give(batches, (loaded, data) if data is not None else None)

    def give(self, batches: list[Batch], read_as: tuple[Loaded, bytes] | None = None) -> None:
        """Give every batch its inputs in the store; batches that carry them already (a retry), whose
        model did not load when planned, or that cannot be read now (their frames fail on the worker,
        naming the file) are left as they are. `read_as`: (the model, its bytes) of batches of one
        model planning read, else each model is read here."""
        started = time.monotonic()
        for b in batches:
            if b.inputs or b.model_digest is None:
                continue
            spec = b.frame_spec(None, 0)
            settings = texture_settings(spec)
            key = (b.model, settings, spec.events)
            if key not in self.done:
                try:
                    self.done[key] = self._model(b.model, settings, spec.events, read_as)
                except FormatError:  # gone or broken since it was planned: its worker says so for its frames
                    self.done[key] = None
            b.inputs = self.done[key]
        self.cost["seconds"] = round(self.cost["seconds"] + time.monotonic() - started, 3)

    def _model(self, source: str, settings, events: str, read_as) -> str:
        if read_as is None:
            data = read_source(source)
            read_as = (read(data, source_label(source)), data)
        (model, context), data = read_as
        found = model_inputs(model, settings, events, context)
        digest = self.store.put_input(data)
        for _sha, blob in sorted(found.blobs.items()):
            self.store.put_input(blob)
            self.cost["bytes"] += len(blob)
        doc = {**Pins(found.answers, _no_fetch).to_dict(), "model": digest}
        self.cost["models"] += 1
        self.cost["inputs"] += len(found.blobs) + 2
        self.cost["bytes"] += len(data)
        return self.store.put_input(json_bytes(doc))


def _no_fetch(digest: str) -> bytes:
    raise AssertionError("the coordinator's pins are written, never read")


def read_batch_model(batch: Batch, store, cache: InputCache | None = None) -> tuple[Loaded, str]:
    """(the batch's model and its context, the sha256 of its bytes): from its travelling inputs when
    it has them (through the worker's cache, the answers pinned in its context), else from its file."""
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
    model, context = read(data, name, resolver=pins.tags(name))
    return Loaded(model, dataclasses.replace(context, pins=pins)), doc["model"]


def _worker_game(batch: Batch) -> tuple:
    """Game data where this worker is: its FARM_GAME_DIR, else the job's (when the paths are here too)."""
    try:
        return default_game() or batch.settings.game
    except SettingError:
        return batch.settings.game

