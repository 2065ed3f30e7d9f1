"""A model's inputs: every lookup drawing it makes, answered where its files are, for a worker that
cannot see them (renderer.assets.pins). No GL: a coordinator calls this.

`model_inputs(model, settings, events)` makes the lookups the renderer makes for the model's frames,
through the same code wherever the renderer has it: the Halo reader's tag lookups (its resolver's
record, made when the model loaded, kept by its context's texture source), the model's textures
(`renderer.texture_set.texture_lookups`: `load_textures`' own walk with decoding off), the effects'
textures (PRE2 replaceable ids, PREM textured particles) and PREM child models with their own
textures and effects one level further, from the effects pass's own list (`renderer.fx.draw.
effect_inputs`: what `EffectResources` draws with), and with
`events="model"` the EVTS tables and what their rows name (splat textures, spawned models). It
answers more than one frame may ask (every emitter, every event), never less.

What it returns, `Inputs`, holds the answers by search (`Pins`' form) and the bytes of everything
found outside game data (which stays where it is), by sha256.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from renderer.assets.pins import TAG_ROOT, search_identity, tags_identity
from renderer.assets.search import AssetSearch
from renderer.context import Loaded, ModelContext
from renderer.errors import FormatError
from renderer.formats import context_of, read
from renderer.fx.draw import child_candidates, effect_inputs, effect_texture_settings
from renderer.fx.events import EventTables, split_name, target
from renderer.model import Model, Texture
from renderer.rules import check_events
from renderer.texture_set import TextureSettings, texture_lookups

CHILD_DEPTH = 2  # a model's PREM children (depth 1) draw their own effects, whose children (depth 2) draw none


@dataclass
class Inputs:
    answers: dict[str, dict[tuple[str, str], dict]] = field(default_factory=dict)  # identity -> lookup -> answer
    blobs: dict[str, bytes] = field(default_factory=dict)  # sha256 -> bytes, of every answer found outside game data

    def add_search(self, identity: str, search: AssetSearch) -> None:
        """Every lookup `search` made, as its answer (found ones by sha256; game data's never pinned)."""
        table = self.answers.setdefault(identity, {})
        for asset in search.seen.values():
            if asset is not None and asset.role != "game":
                self.blobs[asset.sha256] = asset.data
        for entry in search.record:
            key = (entry["kind"], entry["asked"])
            asset = search.seen.get(key)
            if entry.get("missing"):
                table[key] = {k: entry[k] for k in ("missing", "why", "looked", "notes") if k in entry}
            elif asset is not None and asset.role == "game":
                table[key] = {"game": True}
            else:
                table[key] = {k: entry[k] for k in ("found", "sha256", "how", "notes") if k in entry}

    def add_tags(self, name: str, resolver) -> None:
        """The Halo reader's tag lookups (its TagRoot's record and bytes) for the model named `name`."""
        table = self.answers.setdefault(tags_identity(name), {(TAG_ROOT, ""): {"root": resolver.label}})
        for asset in resolver.assets.values():
            self.blobs[asset.sha256] = asset.data
        for entry in resolver.record:
            keep = ("missing", "why", "looked", "said") if entry.get("missing") else ("found", "sha256", "how")
            table[(entry["kind"], entry["asked"])] = {k: entry[k] for k in keep if k in entry}


def model_inputs(model: Model, settings: TextureSettings, events: str = "off",
                 context: ModelContext | None = None) -> Inputs:
    """What drawing `model` in `context` (renderer.context; None: the one its path names) under
    `settings` (and `events`, renderer.rules.EVENTS_MODES) looks up, answered here (see the module
    docstring)."""
    check_events(events)
    out = Inputs()
    _collect(Loaded(model, context_of(model) if context is None else context), settings, events, out, 0)
    return out


def _collect(loaded: Loaded, settings: TextureSettings, events: str, out: Inputs, depth: int) -> None:
    model, where = loaded.model, loaded.context.location
    resolver = getattr(loaded.context.texture_source, "resolver", None)
    if resolver is not None:
        out.add_tags(model.path, resolver)
    search = AssetSearch.for_model(where, settings.assets, settings.game, settings.stop_at,
                                   follow_links=settings.follow_links)
    texture_lookups(model, settings, search, loaded.context)
    if depth < CHILD_DEPTH:
        fx = effect_texture_settings(settings)
        for item in effect_inputs(model):  # the effects pass's own list of what it looks up
            if item.child is not None:
                _child(search, item.child, fx, out, depth)
            else:
                _texture(search, fx, item.texture, loaded)
        if events == "model" and depth == 0:
            _events(loaded, search, fx, out, depth)
    out.add_search(search_identity(where, settings.assets, settings.stop_at, settings.follow_links), search)


def _texture(search: AssetSearch, settings: TextureSettings, texture: Texture, loaded: Loaded) -> None:
    """The lookups of one effect texture: through the model's search, as `EffectResources` draws it."""
    holder = Model(textures=[texture], path=loaded.model.path)
    texture_lookups(holder, settings, search, ModelContext(loaded.context.location))


def _child(search: AssetSearch, path: str, settings: TextureSettings, out: Inputs, depth: int) -> None:
    # a child model is read as the effects pass reads it: from the bytes its search found
    for candidate in child_candidates(path):
        found = search.find(candidate, kind="child model")
        if found is not None:
            try:
                child = read(found.data, found.where)
            except (FormatError, ValueError):  # the frame reports it; nothing more to look up
                return
            _collect(child, settings, "off", out, depth + 1)
            return


def _events(loaded: Loaded, search: AssetSearch, settings: TextureSettings, out: Inputs, depth: int) -> None:
    tables = EventTables(search)
    for e in loaded.model.event_objects:
        kind, ident = split_name(e.name)
        if kind not in ("spawn", "splat", "ubersplat"):
            continue
        row, _ = tables.row(kind, ident)
        if row is None:
            continue
        if kind == "spawn":
            _child(search, target(kind, row), settings, out, depth)
        else:
            _texture(search, settings, Texture(path=target(kind, row)), loaded)
