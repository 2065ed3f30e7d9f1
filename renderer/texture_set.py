"""The RGBA image behind every texture of a model, ready to upload: files found by the model's
asset search (`renderer.assets.search`), team colour and glow for replaceable ids 1 and 2 (from
game data when it is given, else the built-in tables), other replaceable ids through the search,
images a loader provides itself (the model context's `texture_source`, e.g. Halo bitmap tags), and a placeholder
(plus one diagnostic per missing asset) for anything missing. Never fails a frame.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from renderer.assets.cache import DECODED
from renderer.assets.search import AssetSearch
from renderer.context import ModelContext
from renderer.errors import Diagnostic, FormatError
from renderer.formats import context_of
from renderer.model import Model

# Replaceable ids other than team colour/glow, resolved through the asset roots (game layout).
REPLACEABLE_PATHS = {
    11: "ReplaceableTextures\\Cliff\\Cliff0.blp",
    31: "ReplaceableTextures\\LordaeronTree\\LordaeronSummerTree.blp",
    32: "ReplaceableTextures\\AshenvaleTree\\AshenTree.blp",
    33: "ReplaceableTextures\\BarrensTree\\BarrensTree.blp",
    34: "ReplaceableTextures\\NorthrendTree\\NorthTree.blp",
    35: "ReplaceableTextures\\Mushroom\\MushroomTree.blp",
    36: "ReplaceableTextures\\RuinsTree\\RuinsTree.blp",
    37: "ReplaceableTextures\\OutlandMushroomTree\\MushroomTree.blp",
}
# Team colour / glow textures in game data (two-digit team index).
TEAM_TEXTURES = {
    1: ("team-color", "ReplaceableTextures\\TeamColor\\TeamColor{:02d}.blp"),
    2: ("team-glow", "ReplaceableTextures\\TeamGlow\\TeamGlow{:02d}.blp"),
}
DEFAULT_MISSING_TEXTURES = "checker"  # the placeholder drawn for a missing texture unless "white" is asked
MISSING_MODES = (DEFAULT_MISSING_TEXTURES, "white")  # the missing-texture modes: which placeholder is drawn


def placeholder(mode: str) -> np.ndarray:
    """'checker': an 8x8 magenta/black checker, impossible to miss; 'white': opaque white."""
    if mode == "white":
        return np.full((1, 1, 4), 255, np.uint8)
    y, x = np.mgrid[0:8, 0:8]
    img = np.zeros((8, 8, 4), np.uint8)
    img[..., 3] = 255
    on = (x + y) % 2 == 0
    img[on, 0] = 255
    img[on, 2] = 255
    return img


@dataclass(frozen=True)
class TextureSettings:
    """What decides a model's textures besides the model: where the search looks (asset roots, game
    data, the root it climbs no higher than), the team colour and the missing-texture mode (which
    placeholder is drawn: `MISSING_MODES`). Derived once per frame from its FrameSpec
    (`renderer.frame.Renderer.texture_settings`); a ModelGPU is made for one."""

    assets: tuple = ()  # asset roots, searched in order after the model's own folders
    team: int = 0
    missing_textures: str = DEFAULT_MISSING_TEXTURES
    game: tuple = ()  # game data (renderer.assets.search.game_paths), searched last
    stop_at: str | None = None  # the asset / job root holding the model: the search goes no higher
    follow_links: bool = False  # read assets through links out of the searched folders (refused by default)

    def __post_init__(self):
        if self.missing_textures not in MISSING_MODES:
            raise ValueError(f"missing-texture mode must be one of {MISSING_MODES}, got {self.missing_textures!r}")
        object.__setattr__(self, "assets", tuple(str(a) for a in self.assets))
        object.__setattr__(self, "game", tuple(str(g) for g in self.game))


@dataclass
class LoadedTexture:
    rgba: np.ndarray
    wrap_s: bool
    wrap_t: bool
    source: str  # where it was found (path or "archive:entry"), "team-color:N", "team-glow:N", "missing", ...
    mipmaps: str = "generate"  # renderer.formats.textures.mips: generate | stored | none
    levels: tuple = ()  # the stored levels 1.. when mipmaps == "stored"


@dataclass
class TextureSet:
    textures: list[LoadedTexture]
    diagnostics: list[Diagnostic] = field(default_factory=list)
    search: AssetSearch | None = None  # its `record` lists every lookup, found or not


def decode_asset(asset) -> np.ndarray:
    """The decoded image of a found asset, through the per-process digest-keyed cache."""
    # the image decoders (BLP, DDS, TGA, PIL) load with the first texture decoded
    from renderer.formats.textures import decode_texture

    return DECODED.get(asset.sha256, asset.data, asset.where, decode_texture)


def decode_asset_chain(asset):
    """The `MipChain` of a found asset (level 0 and the stored levels to upload), cached like images."""
    # the image decoders (BLP, DDS, TGA, PIL) load with the first texture decoded
    from renderer.formats.textures import decode_texture_chain

    return DECODED.get(asset.sha256, asset.data, asset.where, decode_texture_chain, decoder="texture-chain")


def _missing_sentence(entry: dict, drawn: str) -> str:
    """One warning for a missing asset: what was asked, why it is missing, where the search looked,
    and what the frame draws instead (`drawn`)."""
    looked = entry.get("looked") or []
    where = f"; looked in {len(looked)} place(s): {', '.join(looked)}" if looked else ""
    links = [n for n in entry.get("notes") or () if n.startswith("refused ")]  # a link out of the roots
    refused = f"; {'; '.join(links)}" if links else ""
    return f"{entry['kind']} {entry['asked']!r} {entry['why']}{where}{refused}; {drawn}"


def _source_missing(source, entries: list[dict], reported: set, out: TextureSet) -> None:
    """One warning per asset a texture source looked up and missed (Halo shader and bitmap tags),
    ending with what the source draws instead (its `drawn`, by kind)."""
    for entry in entries:
        if entry.get("missing") and (entry["kind"], entry["asked"]) not in reported:
            reported.add((entry["kind"], entry["asked"]))
            drawn = getattr(source, "drawn", {}).get(entry["kind"], "drawn without it")
            out.diagnostics.append(Diagnostic("assets", None, _missing_sentence(entry, drawn)))


def _team_texture(rid: int, team: int, search: AssetSearch, where: str, out: TextureSet,
                  decode: bool = True) -> tuple[np.ndarray, str]:
    # the image decoders (BLP, DDS, TGA, PIL) load with the first texture decoded
    from renderer.formats.textures import team_color_texture, team_glow_texture

    label, pattern = TEAM_TEXTURES[rid]
    if search.has_game:
        asset = search.find(pattern.format(team), kind=label)
        if asset is not None and not decode:
            return placeholder("checker"), asset.where
        if asset is not None:
            try:
                return decode_asset(asset), asset.where
            except FormatError as e:
                out.diagnostics.append(Diagnostic(where, None, f"cannot decode {asset.where}: {e.sentence()}; "
                                                  "using the built-in team colour"))
    builtin = team_color_texture(team) if rid == 1 else team_glow_texture(team)
    return builtin, f"{label}:{team}"


def model_search(context: ModelContext, settings: TextureSettings) -> AssetSearch:
    """The asset search of a model in `context` under `settings`: over the files from its location
    (`AssetSearch.for_model`), or, on a worker given a job's travelling inputs, the answers pinned for
    it (`ModelContext.pins`, renderer.assets.pins)."""
    if context.pins is not None:
        return context.pins.search(context.location, settings)
    return AssetSearch.for_model(context.location, settings.assets, settings.game, settings.stop_at,
                                 follow_links=settings.follow_links)


def texture_lookups(model: Model, settings: TextureSettings, search: AssetSearch,
                    context: ModelContext | None = None) -> None:
    """The lookups `load_textures` makes for `model`, in its order, without decoding an image: what
    a job's travelling inputs must answer (renderer.inputs). It is `load_textures`' own walk with
    decoding off, so the two cannot drift apart."""
    load_textures(model, settings, search, decode=False, context=context)


def load_textures(model: Model, settings: TextureSettings | None = None,
                  search: AssetSearch | None = None, decode: bool = True,
                  context: ModelContext | None = None) -> TextureSet:
    """The textures of `model` under `settings` (default: TextureSettings()), looked up by `search`
    (default: the model's own search over the settings' asset roots, game data and stop root, see
    `AssetSearch.for_model`), in `context` (where it came from and its texture source; default: the
    one its path names, renderer.formats.context_of). With `decode` False only the lookups are made
    (`texture_lookups`): no image is decoded, and a texture source's images (Halo's, found when the
    model loaded) are not asked for; the set then holds placeholders."""
    settings = TextureSettings() if settings is None else settings
    team, mode = settings.team, settings.missing_textures
    context = context_of(model) if context is None else context
    if search is None:
        search = model_search(context, settings)
    out = TextureSet([], [Diagnostic("assets", None, e) for e in search.errors], search)
    reported: set[tuple[str, str]] = set()
    source = context.texture_source

    def miss(path: str, where: str, wrap_s: bool, wrap_t: bool) -> None:
        if ("texture", path) not in reported:  # one diagnostic per missing path per model
            reported.add(("texture", path))
            entry = next(e for e in search.missing() if e["kind"] == "texture" and e["asked"] == path)
            drawn = f"drawing a {mode} placeholder"
            out.diagnostics.append(Diagnostic(where, None, _missing_sentence(entry, drawn)))
        out.textures.append(LoadedTexture(placeholder(mode), wrap_s, wrap_t, "missing"))

    for i, tex in enumerate(model.textures):
        wrap_s, wrap_t = bool(tex.flags & 1), bool(tex.flags & 2)
        where = f"texture {i}"
        if tex.replaceable_id in TEAM_TEXTURES:
            rgba, label = _team_texture(tex.replaceable_id, team, search, where, out, decode)
            out.textures.append(LoadedTexture(rgba, wrap_s, wrap_t, label))
            continue
        if source is not None and not decode:  # its images were found when the model loaded
            out.textures.append(LoadedTexture(placeholder(mode), True, True, str(tex.path)))
            continue
        if source is not None:
            recorded = len(search.record)
            rgba = source.image(model, i, search)
            _source_missing(source, search.record[recorded:], reported, out)
            if rgba is not None:
                out.textures.append(LoadedTexture(rgba, True, True, str(tex.path)))
                continue
        path = str(tex.path) or REPLACEABLE_PATHS.get(tex.replaceable_id, "")
        if not path:
            what = f"replaceable id {tex.replaceable_id}" if tex.replaceable_id else "an empty path"
            out.diagnostics.append(Diagnostic(where, None, f"{what} names no texture; drawing a {mode} placeholder"))
            out.textures.append(LoadedTexture(placeholder(mode), wrap_s, wrap_t, "missing"))
            continue
        asset = search.find(path)
        if asset is None:
            miss(path, where, wrap_s, wrap_t)
            continue
        for note in asset.notes:
            if (asset.where, note) not in reported:
                reported.add((asset.where, note))
                out.diagnostics.append(Diagnostic("texture path", None, note))
        if not decode:
            out.textures.append(LoadedTexture(placeholder(mode), wrap_s, wrap_t, asset.where))
            continue
        try:
            chain = decode_asset_chain(asset)
        except FormatError as e:
            if ("decode", asset.where) not in reported:
                reported.add(("decode", asset.where))
                out.diagnostics.append(Diagnostic(where, None, f"cannot decode {path!r} ({asset.where}): "
                                                  f"{e.sentence()}; drawing a {mode} placeholder"))
            out.textures.append(LoadedTexture(placeholder(mode), wrap_s, wrap_t, "missing"))
            continue
        out.textures.append(LoadedTexture(chain.top, wrap_s, wrap_t, asset.where, chain.mode, chain.levels[1:]))
    return out
