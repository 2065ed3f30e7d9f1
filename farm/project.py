"""The project file, ``farm.toml``: found in the current folder or the nearest folder above it
(`find_project`, `project`), it says where a project's things are and its defaults::

    store = "farm-out"            # the store (--out) of every command
    goldens = "goldens"           # the goldens folder (--goldens)
    assets = ["assets/war3"]      # asset roots for `farm render` and `farm thumbnails`
    broker = "redis://localhost:6379/0"
    [defaults]                    # any command option, by its long name (dashes or underscores)
    workers = 4
    allow_new = true
    image_base = "https://ci.example/report/"

Paths are relative to the file's folder. The order everywhere: the command line, then the
environment (FARM_OUT, FARM_GOLDENS, FARM_BROKER_URL: farm.environment), then farm.toml, then the
built-in default. The command line applies [defaults] to its parsers (farm.cli).
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass
from pathlib import Path

from farm.settings import SettingError, check_assets, check_image_base, check_text, type_name

__all__ = ["PROJECT_FILE", "Project", "find_project", "project"]

PROJECT_FILE = "farm.toml"
_PROJECT_KEYS = ("store", "goldens", "assets", "broker", "defaults")


@dataclass(frozen=True)
class Project:
    """A farm.toml: its path, the folders it names (absolute) and its [defaults]."""

    path: Path
    store: str | None = None
    goldens: str | None = None
    assets: tuple = ()
    broker: str | None = None
    defaults: dict | None = None


def find_project(start: str | Path | None = None) -> Path | None:
    """The farm.toml in `start` (default: the current folder) or the nearest folder above it."""
    here = Path(start or Path.cwd()).absolute()
    for folder in (here, *here.parents):
        cand = folder / PROJECT_FILE
        if cand.is_file():
            return cand
    return None


def project(start: str | Path | None = None) -> Project | None:
    """The project file found upwards from `start`, read and checked (SettingError naming the file)."""
    path = find_project(start)
    if path is None:
        return None
    try:
        data = tomllib.loads(path.read_text("utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as e:
        raise SettingError(f"{path}: cannot read the project file: {e}") from None
    unknown = sorted(set(data) - set(_PROJECT_KEYS))
    if unknown:
        raise SettingError(f"{path}: unknown key(s) {', '.join(unknown)} (a project file has"
                           f" {', '.join(_PROJECT_KEYS)})")
    base = path.parent

    def folder(key: str) -> str | None:
        value = data.get(key)
        if value is None:
            return None
        text = check_text(value, f"{path}: {key!r}")
        return text if "://" in text else str((base / text).absolute())  # a URL (s3://...) is no folder

    defaults = data.get("defaults") or {}
    if not isinstance(defaults, dict):
        raise SettingError(f"{path}: [defaults] must be a table, not {type_name(defaults)}")
    if "image_base" in defaults or "image-base" in defaults:
        check_image_base(defaults.get("image_base", defaults.get("image-base")), f"{path}: [defaults] image_base")
    assets = check_assets(data["assets"], f"{path}: 'assets'", base) if "assets" in data else ()
    broker = check_text(data["broker"], f"{path}: 'broker'") if "broker" in data else None
    return Project(path, folder("store"), folder("goldens"), assets, broker,
                   {k.replace("-", "_"): v for k, v in defaults.items()})
