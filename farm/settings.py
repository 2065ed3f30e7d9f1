"""Render settings: declared and validated here, nowhere else.

`RenderSettings` is everything a job decides about how a frame is drawn (size, MSAA, background,
camera, team colour, missing-texture placeholder, asset roots). Manifests (farm.plan.manifest),
the command line (farm.cli), thumbnails (farm.thumbs) and batches (farm.plan.batches) all build
one, so a value is accepted or refused by the same rule everywhere, with the same words.

Each ``check_*`` function takes the value and the name to blame (``"'team'"`` in a manifest,
``"--team"`` on the command line) and returns the canonical value or raises `SettingError`, whose
message starts with that name. The manifest adds the file and line in front.

The FARM_* environment variables are farm.environment's; the project file (farm.toml) is
farm.project's.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

from renderer.anim.tracks import MAX_TIME_MS  # the renderer refuses timestamps beyond it too
from renderer.assets.search import ARCHIVE_SUFFIXES, split_source
from renderer.formats.textures.team import REFORGED_TEAMS
from renderer.frame import FrameSpec
from renderer.rules import DEFAULT_LIGHTING, EVENTS_MODES, LIGHTING_RULES, LIGHTS_MODES
from renderer.texture_set import DEFAULT_MISSING_TEXTURES, MISSING_MODES

__all__ = [
    "MAX_SIZE",
    "MAX_TEAM",
    "MAX_TIME_MS",
    "MISSING_POLICIES",
    "MSAA_VALUES",
    "check_assets",
    "check_background",
    "check_camera",
    "check_events",
    "check_game",
    "check_image_base",
    "check_lighting",
    "check_lights",
    "check_missing_policy",
    "check_missing_textures",
    "check_msaa",
    "check_size",
    "check_team",
    "check_text",
    "check_time",
    "containing_root",
    "RenderSettings",
    "SettingError",
    "type_name",
]

MISSING_POLICIES = ("warn", "fail")  # what a frame rendered with a missing asset is: done (noted) or failed
MSAA_VALUES = (0, 1, 2, 4, 8, 16)
MAX_SIZE = 8192
MAX_TEAM = REFORGED_TEAMS - 1  # team colour indices 0..27


class SettingError(ValueError):
    """A setting that cannot be used; the message names the setting as the caller called it."""


def type_name(value) -> str:
    """TOML's name for a value's type, for messages."""
    return {bool: "boolean", int: "integer", float: "float", str: "string", list: "array", dict: "table"}.get(
        type(value), type(value).__name__)


def check_int(value, name: str, lo: int, hi: int | None = None, allowed: Iterable[int] | None = None) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise SettingError(f"{name} must be an integer, not {type_name(value)} {value!r}")
    if allowed is not None and value not in tuple(allowed):
        raise SettingError(f"{name} must be one of {', '.join(map(str, allowed))}, not {value}")
    if value < lo or (hi is not None and value > hi):
        rng = f"between {lo} and {hi}" if hi is not None else f"at least {lo}"
        raise SettingError(f"{name} must be {rng}, not {value}")
    return value


def check_size(value, name: str = "size") -> tuple[int, int]:
    """"WxH" (any case of x), [w, h], or one integer N for NxN (thumbnails): (w, h) in 1..MAX_SIZE."""
    if isinstance(value, int) and not isinstance(value, bool):
        w = h = value
    elif isinstance(value, str):
        m = re.fullmatch(r"\s*(\d+)\s*(?:[xX]\s*(\d+)\s*)?", value)
        if not m:
            raise SettingError(f"{name} must look like \"512x512\" or [512, 512], not {value!r}")
        w = int(m.group(1))
        h = int(m.group(2)) if m.group(2) is not None else w
    elif isinstance(value, (list, tuple)):
        if len(value) != 2 or any(isinstance(v, bool) or not isinstance(v, int) for v in value):
            raise SettingError(f"{name} must be two integers [width, height], not {list(value)!r}")
        w, h = value
    else:
        raise SettingError(f"{name} must be a string \"WxH\" or [width, height], not {type_name(value)} {value!r}")
    if not (1 <= w <= MAX_SIZE and 1 <= h <= MAX_SIZE):
        raise SettingError(f"{name} {w}x{h} is outside 1..{MAX_SIZE}")
    return int(w), int(h)


def check_time(value, name: str = "time") -> int:
    """A timestamp in ms from the sequence start: an integer in 0..MAX_TIME_MS."""
    return check_int(value, name, 0, MAX_TIME_MS)


def check_msaa(value, name: str = "msaa") -> int:
    return check_int(value, name, 0, 16, allowed=MSAA_VALUES)


def check_team(value, name: str = "team") -> int:
    return check_int(value, name, 0, MAX_TEAM)


def check_text(value, name: str) -> str:
    if not isinstance(value, str):
        raise SettingError(f"{name} must be a string, not {type_name(value)} {value!r}")
    return value


def check_background(value, name: str = "background") -> str:
    value = check_text(value, name)
    if value == "transparent":
        return value
    if not re.fullmatch(r"#[0-9a-fA-F]{6}", value):
        raise SettingError(f"{name} must be \"transparent\" or \"#rrggbb\", not {value!r}")
    return value.lower()


def check_camera(value, name: str = "camera") -> str:
    """auto | a CAMS camera name | ex,ey,ez:tx,ty,tz[:ux,uy,uz[:fov]] with finite numbers."""
    value = check_text(value, name).strip()
    if not value or "|" in value:
        raise SettingError(f"{name} must be \"auto\", a camera name or ex,ey,ez:tx,ty,tz[:ux,uy,uz[:fov]]"
                           f" (no '|'), not {value!r}")
    # numbers, or words float() reads as numbers ("nan,nan,nan:0,0,0"): an explicit camera, checked
    if re.fullmatch(r"[-+0-9.eEaAnNiIfFtTyY,:\s]+", value) and ("," in value or any(c.isdigit() for c in value)):
        groups = value.split(":")
        ok = 2 <= len(groups) <= 4 and all(len(g.split(",")) == 3 for g in groups[:3])
        if ok and len(groups) == 4:
            ok = len(groups[3].split(",")) == 1
        try:
            nums = [float(x) for g in groups for x in g.split(",")] if ok else []
        except ValueError:
            ok = False
        if ok and not all(math.isfinite(x) for x in nums):
            ok = False
        if not ok:
            raise SettingError(f"{name}: an explicit camera is ex,ey,ez:tx,ty,tz[:ux,uy,uz[:fov]] with finite"
                               f" numbers, not {value!r}")
        eye, target = nums[0:3], nums[3:6]
        view = [t - e for e, t in zip(eye, target, strict=True)]
        if not any(view):
            raise SettingError(f"{name}: the eye and the target are the same point ({value!r}): nothing to look at")
        if len(nums) >= 9:
            up = nums[6:9]
            cross = (view[1] * up[2] - view[2] * up[1], view[2] * up[0] - view[0] * up[2],
                     view[0] * up[1] - view[1] * up[0])
            if not any(abs(c) > 1e-12 for c in cross):
                raise SettingError(f"{name}: the up vector is zero or along the view direction ({value!r})")
        if len(nums) == 10 and not 0 < nums[9] < 180:
            raise SettingError(f"{name}: the field of view must be between 0 and 180 degrees, not {nums[9]:g}")
    return value


def check_mode(value, name: str, modes: tuple) -> str:
    """One of a few named choices (`modes`), or SettingError listing them."""
    value = check_text(value, name)
    if value not in modes:
        allowed = " or ".join(f'"{m}"' for m in modes)
        raise SettingError(f"{name} must be {allowed}, not {value!r}")
    return value


def check_missing_textures(value, name: str = "missing_textures") -> str:
    return check_mode(value, name, MISSING_MODES)


def _is_archive(p: Path) -> bool:
    return p.is_file() and p.suffix.lower() in ARCHIVE_SUFFIXES


def check_assets(values, name: str = "assets", base: str | Path | None = None) -> tuple[str, ...]:
    """Asset roots: folders or MPQ archives (.mpq, .w3x, .w3m; relative to `base`), absolute, in
    order, without repeats."""
    if isinstance(values, (str, Path)):
        values = [values]
    if not isinstance(values, (list, tuple)) or any(not isinstance(v, (str, Path)) for v in values):
        raise SettingError(f"{name} must be a list of folders or MPQ archives, not {type_name(values)} {values!r}")
    out = []
    for v in values:
        p = (Path(base) / v if base is not None else Path(v)).resolve()
        if not (p.is_dir() or _is_archive(p)):
            raise SettingError(f"{name}: asset root {str(v)!r} is not a folder or an MPQ archive"
                               f" ({', '.join(ARCHIVE_SUFFIXES)}) (looked for {p})")
        out.append(str(p))
    return tuple(dict.fromkeys(out))


def check_game(values, name: str = "game", base: str | Path | None = None) -> tuple[str, ...]:
    """Game data: a Warcraft III installation folder (its archives are found in the game's order),
    game archives, or folders of extracted data (Reforged's CASC storage must be extracted first)."""
    return check_assets(values, name, base)


def check_lighting(value, name: str = "lighting") -> str:
    """A lighting rule by name (renderer.rules.LIGHTING_RULES; the default is the viewer's)."""
    return check_mode(value, name, tuple(sorted(LIGHTING_RULES)))


def check_lights(value, name: str = "lights") -> str:
    """Model lights (LITE): "off" or "model" (renderer.rules.LIGHTS_MODES)."""
    return check_mode(value, name, LIGHTS_MODES)


def check_events(value, name: str = "events") -> str:
    """EVTS event visuals: "off" or "model" (renderer.rules.EVENTS_MODES)."""
    return check_mode(value, name, EVENTS_MODES)


def check_missing_policy(value, name: str = "missing") -> str:
    return check_mode(value, name, MISSING_POLICIES)


def check_image_base(value, name: str = "--image-base") -> str | None:
    """Where a report folder is published, for summary.md's image links: an absolute http(s) URL,
    or None (no image links). A relative base would give links that break once the summary is
    posted as a pull-request comment, so it is refused."""
    if value is None:
        return None
    text = check_text(value, name).strip()
    if not re.fullmatch(r"https?://[^/\s?#]+(/\S*)?", text, re.IGNORECASE):
        raise SettingError(f"{name} must be an absolute http(s) URL where the report folder is published (such as"
                           f" https://ci.example/job/7/report/), not {value!r}: relative image links break once"
                           f" summary.md is posted")
    return text


@dataclass(frozen=True)
class RenderSettings:
    """How a frame is drawn, validated on construction (SettingError). JSON-friendly."""

    width: int = 256
    height: int = 256
    msaa: int = 0
    background: str = "transparent"
    camera: str = "auto"
    team: int = 0
    missing_textures: str = DEFAULT_MISSING_TEXTURES  # the placeholder of a missing texture (MISSING_MODES)
    assets: tuple = ()  # absolute folders or archives, searched in order after the model's own folders
    game: tuple = ()  # game data (an installation folder, archives, extracted folders), searched last
    lighting: str = DEFAULT_LIGHTING  # a rule of renderer.rules.LIGHTING_RULES
    lights: str = "off"  # the model's LITE lights: off | model
    events: str = "off"  # EVTS event visuals: off | model

    def __post_init__(self):
        w, h = check_size([self.width, self.height])
        object.__setattr__(self, "width", w)
        object.__setattr__(self, "height", h)
        object.__setattr__(self, "msaa", check_msaa(self.msaa))
        object.__setattr__(self, "background", check_background(self.background))
        object.__setattr__(self, "camera", check_camera(self.camera))
        object.__setattr__(self, "team", check_team(self.team))
        object.__setattr__(self, "missing_textures", check_missing_textures(self.missing_textures))
        object.__setattr__(self, "assets", tuple(str(a) for a in self.assets))
        object.__setattr__(self, "game", tuple(str(a) for a in self.game))
        object.__setattr__(self, "lighting", check_lighting(self.lighting))
        object.__setattr__(self, "lights", check_lights(self.lights))
        object.__setattr__(self, "events", check_events(self.events))

    FIELDS = ("width", "height", "msaa", "background", "camera", "team", "missing_textures", "assets", "game",
              "lighting", "lights", "events")

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> RenderSettings:
        """The settings among `d`'s keys (other keys are ignored)."""
        return cls(**{k: (tuple(d[k]) if k in ("assets", "game") else d[k]) for k in cls.FIELDS if k in d})

    @classmethod
    def split(cls, d: Mapping[str, Any]) -> tuple[RenderSettings, dict]:
        """(the settings among `d`'s keys, the other keys): how flat documents (job files, Celery
        messages) that carry settings next to other fields are read."""
        return cls.from_dict(d), {k: v for k, v in d.items() if k not in cls.FIELDS}

    def to_dict(self) -> dict:
        d = asdict(self)
        d["assets"] = list(self.assets)
        if self.game:
            d["game"] = list(self.game)
        else:
            del d["game"]  # the form job files and Celery messages had before game data existed
        if self.lighting == DEFAULT_LIGHTING:
            del d["lighting"]  # likewise
        for k in ("lights", "events"):
            if d[k] == "off":
                del d[k]  # likewise
        return d

    def replace(self, **changes) -> RenderSettings:
        return replace(self, **changes)

    def frame_spec(self, sequence: int | None, time_ms: int, stop_at: str | None = None):
        """The renderer's FrameSpec for one frame under these settings; `stop_at` is the job or asset
        root that holds the model (the texture search climbs no higher)."""
        return FrameSpec(sequence=sequence, time_ms=int(time_ms), width=self.width, height=self.height,
                         camera=self.camera, team=self.team, msaa=self.msaa, background=self.background,
                         assets=tuple(self.assets), missing_textures=self.missing_textures, game=tuple(self.game),
                         stop_at=stop_at, lighting=self.lighting, lights=self.lights, events=self.events)


def containing_root(model: str | Path, roots) -> str | None:
    """The first of `roots` (folders) that holds `model` (a path or ARCHIVE:ENTRY source): where its
    texture search stops climbing. None when none does."""
    split = split_source(model)
    path = Path(split[0] if split else model).resolve()
    for r in roots:
        root = Path(r).resolve()
        if root.is_dir() and path.is_relative_to(root):
            return str(root)
    return None
