"""Render settings: declared and validated here, nowhere else.

`RenderSettings` is everything a job decides about how a frame is drawn (size, MSAA, background,
camera, team colour, missing-texture placeholder, asset roots). Manifests (farm.plan.manifest),
the command line (farm.cli), thumbnails (farm.thumbs) and batches (farm.plan.batches) all build
one, so a value is accepted or refused by the same rule everywhere, with the same words.

`RENDER_SETTINGS` is the one table of render settings: a `Setting` row each (name, type, default,
check, help, farm render's flag, how trace keys spell it and where, how documents carry it, an
example). `RenderSettings`' fields, its documents (`to_dict`/`from_dict`, the form of job files and
Celery messages of 0.2 kept), its FrameSpec (`frame_spec`), the manifest's keys
(farm.plan.manifest), the trace key's parts and order (farm.plan.keys), the command line's flags
(farm.cli.options) and farm view's command (`flag_words`) are all made from it: a new setting is a
row here and its use in the renderer (a FrameSpec field of the same name).

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
from dataclasses import dataclass, make_dataclass, replace
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
    "check_bool",
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
    "flag_words",
    "KeyPart",
    "RENDER_SETTINGS",
    "RenderSettings",
    "SETTINGS_BY_NAME",
    "Setting",
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


def check_bool(value, name: str) -> bool:
    if not isinstance(value, bool):
        raise SettingError(f"{name} must be true or false, not {type_name(value)} {value!r}")
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


def _as_paths(values, name: str = "assets") -> tuple[str, ...]:
    """Asset roots as a document carries them (already checked where they were given): strings, in order."""
    return tuple(str(a) for a in values)


@dataclass(frozen=True)
class KeyPart:
    """How a trace key spells a setting (farm.plan.keys builds and parses keys from these)."""

    position: int | None = None  # its place among the fixed parts after the time (0 first); None: an optional part
    prefix: str = ""  # "msaa" of "msaa4"; an optional part is "lighting=NAME", or its value alone without one


@dataclass(frozen=True)
class Setting:
    """One render setting, declared once: every place it appears is derived from this row."""

    name: str  # the manifest's key and the RenderSettings field (a size is the fields width and height)
    type: type  # of the value: int, str, bool (a switch), tuple (a list: repeatable flag), "size" below
    default: Any
    check: Any  # (value, name to blame[, base folder]) -> the canonical value, or SettingError
    help: str  # the command line's help ({default}: the command's default)
    flag: str | None = None  # farm render's option (None: none)
    key: KeyPart | None = None  # how trace keys spell it (None: not in keys)
    fields: tuple = ()  # the RenderSettings (and FrameSpec) fields it fills; default (name,)
    choices: tuple | None = None  # the allowed values, listed by --help
    relative: bool = False  # paths: relative to the manifest's folder (check takes the base)
    accumulates: bool = False  # a [[models]] entry's values add to the job's instead of replacing them
    stored: Any = None  # how a document's value is taken (default: check); paths were checked where given
    omitted: bool = False  # written to documents only when not the default: the form from before it existed
    named: bool = False  # named in a command line (farm view's) even at its default, as before
    example: Any = None  # a valid value that is not the default (tests take every row through every place)

    @property
    def attrs(self) -> tuple[str, ...]:
        return self.fields or (self.name,)

    def value(self, settings) -> Any:
        """This setting's value in `settings` (a RenderSettings, a trace key): (w, h) for the size."""
        return tuple(getattr(settings, a) for a in self.attrs) if len(self.attrs) > 1 else getattr(settings, self.name)

    def spread(self, value) -> dict:
        """{field: value} for a value of this setting."""
        return dict(zip(self.attrs, value, strict=True)) if len(self.attrs) > 1 else {self.name: value}

    def text(self, value) -> list[str]:
        """How a command line spells a value: one word, or one per item of a list (repeated flags);
        none for a switch (bool: the flag alone says true)."""
        if self.type is bool:
            return []
        if self.type is SIZE:
            return [f"{value[0]}x{value[1]}"]
        return [str(v) for v in value] if self.type is tuple else [str(value)]

    def from_text(self, text: str, name: str):
        """A command line's word for this setting, checked by its rule under the flag's `name`."""
        if self.type is int:
            try:
                text = int(text)
            except ValueError:
                raise SettingError(f"{name} must be a whole number, not {text!r}") from None
        return self.check(text, name)


SIZE = "size"  # Setting.type of a width and height given together (check_size)

# The render settings, in RenderSettings' field order (the order of its positional arguments and of a
# command line); the key position orders the fixed parts of a trace key, optional parts follow in this order.
RENDER_SETTINGS = (
    Setting("size", SIZE, (256, 256), check_size, "WxH or N (NxN), default {default}", flag="--size",
            key=KeyPart(1), fields=("width", "height"), named=True, example=(64, 32)),
    Setting("msaa", int, 0, check_msaa, "MSAA samples (clamped to what GL grants)", flag="--msaa",
            key=KeyPart(2, "msaa"), example=4),
    Setting("background", str, "transparent", check_background, "transparent or #rrggbb", flag="--background",
            key=KeyPart(4), named=True, example="#a0b0c0"),
    Setting("camera", str, "auto", check_camera, "auto | a CAMS camera name | ex,ey,ez:tx,ty,tz[:ux,uy,uz[:fov]]",
            flag="--camera", key=KeyPart(0), named=True, example="1,2,3:0,0,0"),
    Setting("team", int, 0, check_team, f"team colour index 0-{MAX_TEAM}", flag="--team", key=KeyPart(3, "team"),
            named=True, example=3),
    Setting("missing_textures", str, DEFAULT_MISSING_TEXTURES, check_missing_textures,
            "what a texture that cannot be found is drawn as (default {default})", flag="--missing-textures",
            key=KeyPart(), choices=MISSING_MODES, named=True, example="white"),
    Setting("assets", tuple, (), check_assets, "asset root, a folder or an MPQ archive (.mpq, .w3x, .w3m); repeatable,"
            " searched in order after the model's folder and the folders above it up to its map", flag="--assets",
            relative=True, accumulates=True, stored=_as_paths),
    Setting("game", tuple, (), check_game, "Warcraft III game data, searched last: the installation folder (its MPQ"
            " archives, patch first), archives, or extracted data (default: $FARM_GAME_DIR)", flag="--game",
            relative=True, stored=_as_paths, omitted=True),
    Setting("lighting", str, DEFAULT_LIGHTING, check_lighting, "lighting rule (renderer/rules.py; default {default}:"
            " the most used viewer's)", flag="--lighting", key=KeyPart(None, "lighting="),
            choices=tuple(sorted(LIGHTING_RULES)), omitted=True, named=True,
            example=next(r for r in sorted(LIGHTING_RULES) if r != DEFAULT_LIGHTING)),
    Setting("lights", str, "off", check_lights, "model: the model's own LITE lights shade it too, on top of --lighting"
            " (renderer/rules.py, 'Model lights'); default off", flag="--lights", key=KeyPart(None, "lights="),
            choices=LIGHTS_MODES, omitted=True, named=True, example="model"),
    Setting("events", str, "off", check_events, "model: draw EVTS event visuals (spawned models, splats; from the"
            " game's SLK tables, found like textures: --assets, --game); default off (renderer/rules.py,"
            " EVENTS_MODES)", flag="--events", key=KeyPart(None, "events="), choices=EVENTS_MODES, omitted=True,
            example="model"),
    Setting("background_alpha", int, 255, lambda value, name: check_int(value, name, 0, 255),
            "the opacity 0-255 of a #rrggbb --background (default 255: opaque; transparent stays 0)",
            flag="--background-alpha", key=KeyPart(None, "alpha="), omitted=True, example=128),
    Setting("follow_links", bool, False, check_bool, "read textures and tables (and, in farm run and"
            " thumbnails, models and archives) through links whose real path leaves the roots named and the"
            " folders searched; refused by default, each naming the link and where it points", flag="--follow-links",
            omitted=True, example=True),
)
SETTINGS_BY_NAME = {s.name: s for s in RENDER_SETTINGS}


class _Settings:
    """RenderSettings' behaviour; its fields are made from RENDER_SETTINGS below."""

    FIELDS = tuple(a for s in RENDER_SETTINGS for a in s.attrs)

    def __post_init__(self):
        for s in RENDER_SETTINGS:
            value = (s.stored or s.check)(s.value(self), s.name)
            for a, v in s.spread(value).items():
                object.__setattr__(self, a, v)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> RenderSettings:
        """The settings among `d`'s keys (other keys are ignored)."""
        lists = {a for s in RENDER_SETTINGS if s.type is tuple for a in s.attrs}
        return cls(**{k: (tuple(d[k]) if k in lists else d[k]) for k in cls.FIELDS if k in d})

    @classmethod
    def split(cls, d: Mapping[str, Any], made: dict | None = None) -> tuple[RenderSettings, dict]:
        """(the settings among `d`'s keys, the other keys): how flat documents (job files, Celery
        messages) that carry settings next to other fields are read. `made` (the caller's, for many
        documents read together: an envelope's batches): settings already made, by their values, so
        the same values are checked and made once, not once a document."""
        rest = {k: v for k, v in d.items() if k not in cls.FIELDS}
        if made is None:
            return cls.from_dict(d), rest
        key = tuple((k, tuple(v) if isinstance(v, list) else v) for k, v in d.items() if k in cls.FIELDS)
        try:
            settings = made.get(key)
        except TypeError:  # a value no setting takes (a mapping, a nested list): from_dict says which
            return cls.from_dict(d), rest
        if settings is None:
            settings = made[key] = cls.from_dict(d)
        return settings, rest

    def to_dict(self) -> dict:
        """JSON: lists for tuples; a setting newer than job files and Celery messages (`omitted`) only
        when it is not its default, so documents of settings at their defaults are as they were. Made
        once per settings object (they are frozen), a fresh copy each call."""
        d = self.__dict__.get("_document")
        if d is None:
            d = {}
            for s in RENDER_SETTINGS:
                value = s.value(self)
                if s.omitted and value == s.default:
                    continue
                d.update(s.spread(list(value) if s.type is tuple else value))
            object.__setattr__(self, "_document", d)  # not a field: equality, hashing and replace() ignore it
        return {k: list(v) if isinstance(v, list) else v for k, v in d.items()}

    def replace(self, **changes) -> RenderSettings:
        return replace(self, **changes)

    def frame_spec(self, sequence: int | None, time_ms: int, stop_at: str | None = None):
        """The renderer's FrameSpec for one frame under these settings; `stop_at` is the job or asset
        root that holds the model (the texture search climbs no higher)."""
        return FrameSpec(sequence=sequence, time_ms=int(time_ms), stop_at=stop_at,
                         **{a: getattr(self, a) for a in self.FIELDS})


RenderSettings = make_dataclass(
    "RenderSettings", [(a, Any, v) for s in RENDER_SETTINGS for a, v in s.spread(s.default).items()],
    bases=(_Settings,), frozen=True, namespace={"__doc__": "How a frame is drawn, validated on construction"
                                                           " (SettingError), one field per RENDER_SETTINGS row."})
RenderSettings.__module__ = __name__


def flag_words(settings: RenderSettings) -> list[str]:
    """The command-line flags (farm render's) that give `settings`: each setting that is not at its
    default, and those the table names always (`named`), in the table's order."""
    words = []
    for s in RENDER_SETTINGS:
        value = s.value(settings)
        if s.flag is not None and (s.named or value != s.default):
            if s.type is bool:
                words += [s.flag] if value else []
            for text in s.text(value):
                words += [s.flag, text]
    return words


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
