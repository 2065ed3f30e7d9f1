"""Finding a model's assets: the search order and its record (`search`), MPQ archives through
StormLib (`mpq`), folder and archive stores (`stores`), game installations (`game`), models inside
archives (`sources`: `maps/foo.w3x:war3mapImported/x.mdx`) and the decoded-texture cache (`cache`).
"""

from renderer.assets.cache import DECODED, DecodeCache
from renderer.assets.game import GAME_ARCHIVES, CascStorageError, GameDataError, game_archives, order_archives
from renderer.assets.mpq import MpqArchive, MpqError
from renderer.assets.search import Asset, AssetSearch, ModelLocation, game_paths
from renderer.assets.sources import list_models, read_source, source_name, split_source
from renderer.assets.trees import close_archives, open_archive

__all__ = [
    "DECODED",
    "GAME_ARCHIVES",
    "Asset",
    "AssetSearch",
    "CascStorageError",
    "DecodeCache",
    "GameDataError",
    "ModelLocation",
    "MpqArchive",
    "MpqError",
    "close_archives",
    "game_archives",
    "game_paths",
    "list_models",
    "open_archive",
    "order_archives",
    "read_source",
    "source_name",
    "split_source",
]
