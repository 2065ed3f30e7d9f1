"""Pinned answers: the lookups a coordinator made for a model where its files are, given again on a
worker that cannot see them (inputs that travel with a job).

A coordinator that sends a job to machines sharing only an object store resolves each model's inputs
where the files are (`renderer.inputs.model_inputs`: the searches the renderer makes) and uploads
every byte found under its sha256. A worker gets `Pins`: for each search, named by `search_identity`
(the model's location, the asset roots and the stop root: what decides a lookup's answer, known
without the files), what each lookup (kind, asked) answered, found (where, how, notes, sha256) or
missing (why, looked), and `fetch(sha256) -> bytes`, which gets the bytes (a worker's cache, else
the store). `PinnedSearch` is then the model's `AssetSearch` (renderer.texture_set.model_search) and
`PinnedTags` the Halo reader's resolver: a pinned answer is given again, record for record, so a
frame's pixels and asset record are those of a worker that sees the files.

Game data is never pinned: it stays where it is. What the coordinator found in game data, what it
did not find, and any lookup it did not foresee are searched in the worker's own game data
(`Pins.game`: the worker's FARM_GAME_DIR, else the job's); what that has not is missing, with the
coordinator's reason when it had one. A fetch that fails raises `InputError`.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from renderer.assets.game import GameDataError
from renderer.assets.search import Asset, AssetSearch, ModelLocation, _root_base, game_paths

FORMAT = "modelfarm.inputs/1"
TAGS = "halo tags"  # the identity prefix of a Halo model's tag lookups (the reader's resolver)
TAG_ROOT = "halo tag root"  # the kind of the pinned answer that names the coordinator's tag root


class InputError(OSError):
    """An input a job pinned could not be fetched (the store unreachable, the object gone or damaged)."""


def search_identity(where: ModelLocation, assets=(), stop_at=None, follow_links: bool = False) -> str:
    """The name of a model's search: what decides its answers besides the files (the model's folder or
    archive entry folder, the asset roots in order, the stop root, whether links out are followed),
    computable where the files are not."""
    place = [str(where.archive), list(where.entry_folder())] if where.archive is not None else [str(where.folder)]
    return json.dumps([place, [str(a) for a in assets], None if stop_at is None else str(stop_at),
                       *(["follow_links"] if follow_links else [])])


def tags_identity(name: str) -> str:
    return f"{TAGS}|{name}"


class Pins:
    """Answers by search identity and (kind, asked), and how to fetch the bytes they name."""

    def __init__(self, answers: dict[str, dict[tuple[str, str], dict]], fetch: Callable[[str], bytes],
                 game=()):
        self.answers = answers
        self.fetch_bytes = fetch
        self.game = tuple(str(g) for g in game)

    def answer(self, identity: str, kind: str, asked: str) -> dict | None:
        return self.answers.get(identity, {}).get((kind, asked))

    def fetch(self, sha256: str) -> bytes:
        try:
            return self.fetch_bytes(sha256)
        except InputError:
            raise
        except (OSError, ValueError, RuntimeError) as e:
            raise InputError(f"input {sha256[:12]}... cannot be fetched: {e}") from e

    def search(self, where: ModelLocation, settings) -> PinnedSearch:
        """The pinned search for a model at `where` under TextureSettings-like `settings` (asset roots,
        stop root; game data only when the settings search game data, as the search over the files)."""
        errors: list[str] = []
        bases, fences = [], []
        try:
            paths = game_paths(self.game) if settings.game else []
        except GameDataError as e:
            errors.append(f"game data {e}")
            paths = []
        for p in paths:
            base, fence = _root_base(Path(p), "game", errors)
            if base is not None:
                bases.append(base)
            if fence is not None:
                fences.append(fence)
        return PinnedSearch(self, search_identity(where, settings.assets, settings.stop_at,
                                                     getattr(settings, "follow_links", False)), bases, fences, errors)

    def tags(self, name: str) -> PinnedTags | None:
        """The Halo reader's resolver for the model named `name`; None when the coordinator's reader
        had no tag root either (the reader then finds none, as it did there)."""
        ident = tags_identity(name)
        return PinnedTags(self, ident) if self.answer(ident, TAG_ROOT, "") is not None else None

    def to_dict(self) -> dict:
        return {"format": FORMAT, "searches": {ident: [[k, a, ans] for (k, a), ans in sorted(table.items())]
                                               for ident, table in sorted(self.answers.items())}}

    @classmethod
    def from_dict(cls, doc: dict, fetch: Callable[[str], bytes], game=()) -> Pins:
        if not isinstance(doc, dict) or doc.get("format") != FORMAT or not isinstance(doc.get("searches"), dict):
            raise ValueError(f"not a {FORMAT} document")
        answers = {ident: {(str(k), str(a)): dict(ans) for k, a, ans in rows}
                   for ident, rows in doc["searches"].items()}
        return cls(answers, fetch, game)


class PinnedSearch(AssetSearch):
    """A model's asset search on a worker: pinned answers first, then the worker's own game data."""

    def __init__(self, pins: Pins, identity: str, bases, fences, errors):
        super().__init__(bases, fences, errors)
        self.pins, self.identity = pins, identity

    def _find(self, asked: str, kind: str, roles) -> Asset | None:
        answer = self.pins.answer(self.identity, kind, asked)
        if answer is not None and "found" in answer:
            data = self.pins.fetch(answer["sha256"])
            return self.note_found(kind, asked, answer["found"], data, answer.get("how", "exact"),
                                   answer.get("notes", ()))
        # else the worker's own game data; what it has not is missing, with the coordinator's reason if any
        return super()._find(asked, kind, roles, answer if answer is not None and answer.get("missing") else None)


class PinnedTags:
    """The Halo reader's resolver on a worker (the interface of renderer.formats.halo.TagRoot): the
    tag lookups a coordinator's TagRoot answered, fetched by sha256."""

    kind = "halo tag"

    def __init__(self, pins: Pins, identity: str):
        self.pins, self.identity = pins, identity
        self.assets: dict[str, Asset] = {}
        self.record: list[dict] = []
        self.label = (pins.answer(identity, TAG_ROOT, "") or {}).get("root", "")

    def find(self, tag_path: str, extension: str) -> tuple[Asset | None, str]:
        asked = tag_path + extension
        answer = self.pins.answer(self.identity, self.kind, asked) or {}
        if "found" in answer:
            if asked not in self.assets:
                data = self.pins.fetch(answer["sha256"])
                self.assets[asked] = Asset(self.kind, asked, answer["found"], data, answer["sha256"])
            return self.assets[asked], ""
        return None, answer.get("said", f"{asked!r} was not pinned for this model")

    def missing_why(self, tag_path: str, extension: str = "") -> str:
        answer = self.pins.answer(self.identity, self.kind, tag_path + extension) or {}
        return answer.get("why", "was not pinned for this model")
