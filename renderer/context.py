"""Where a model came from and how its inputs are found: the run-time state that goes beside a
neutral Model (renderer.model holds what the file says, nothing about this run).

`ModelContext` is that state, frozen: the model's location (`ModelLocation`: its folder, or archive
and entry, and the sha256 of its bytes), what draws its textures when they are not path lookups
(`texture_source`: Halo's bitmap tags, found while it loaded), and a worker's pinned answers when its
files are elsewhere (`pins`, renderer.assets.pins). A loader returns it with the model
(`renderer.formats.read` / `load` -> `Loaded(model, context)`); the renderer (`Renderer.render(...,
context=)`), the texture set, the inputs walk and the effects pass take it beside the model. A PREM
child model gets its own context (`child`): its own location, its parent's pins.

A caller that has only a Model (read with `load_model`, or built in memory) gets the context its
`path` names (`renderer.formats.context_of`); a format whose reader finds its inputs while it loads
(Halo) has none to derive, and says so instead of drawing flat colours.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import NamedTuple

from renderer.assets.search import ModelLocation
from renderer.model import Model


@dataclass(frozen=True)
class ModelContext:
    location: ModelLocation
    # What draws the model's textures when they are not path lookups (e.g. Halo bitmap tags): an object
    # with `image(model, index, search) -> RGBA array | None`; None: every texture is a path lookup.
    texture_source: object = None
    # A worker's answers for the lookups the model (and its child models) makes when the files are
    # elsewhere (renderer.assets.pins.Pins: inputs that travel with a job); None: search the files.
    pins: object = None

    @classmethod
    def from_path(cls, path: str) -> ModelContext:
        """The context a path names ("dir/x.mdx", "maps/foo.w3x:war3mapImported/x.mdx"): its location
        (no digest), no texture source, no pins."""
        return cls(ModelLocation.from_path(str(path or "")))

    def child(self, loaded: Loaded) -> Loaded:
        """A PREM child model read while drawing this one (`loaded`, from the bytes the search found):
        its own location and texture source, this model's pins (its lookups are answered the same way)."""
        return Loaded(loaded.model, dataclasses.replace(loaded.context, pins=self.pins))


class Loaded(NamedTuple):
    """What a loader returns: the neutral model and its context."""

    model: Model
    context: ModelContext
