"""Render settings and FARM_* environment variables: declared and validated here, nowhere else.

`RenderSettings` is everything a job decides about how a frame is drawn (size, MSAA, background,
camera, team colour, missing-texture placeholder, asset roots). Manifests (farm.plan.manifest),
the command line (farm.cli), thumbnails (farm.thumbs) and batches (farm.plan.batches) all build
one, so a value is accepted or refused by the same rule everywhere, with the same words.

Each ``check_*`` function takes the value and the name to blame (``"'team'"`` in a manifest,
``"--team"`` on the command line) and returns the canonical value or raises `SettingError`, whose
message starts with that name. The manifest adds the file and line in front.

Environment variables: `FARM_VARIABLES` lists every ``FARM_*`` variable the farm reads, with what
it does and its default (`farm --help` prints it: `variables_help`; a test checks that the source
reads no other). `env_int` is the one parser of integer ``FARM_*`` variables (a bad value is an
error naming the variable, never silently ignored); `default_out` and `broker_url` are the store
and broker that commands use when none is given.

The project file: ``farm.toml``, found in the current folder or the nearest folder above it
(`find_project`, `project`), says where a project's things are and its defaults::

    store = "farm-out"            # the store (--out) of every command
    goldens = "goldens"           # the goldens folder (--goldens)
    assets = ["assets/war3"]      # asset roots for `farm render` and `farm thumbnails`
    broker = "redis://localhost:6379/0"
    [defaults]                    # any command option, by its long name (dashes or underscores)
    workers = 4
    allow_new = true
    image_base = "https://ci.example/report/"

Paths are relative to the file's folder. The order everywhere: the command line, then the
environment (FARM_OUT, FARM_GOLDENS, FARM_BROKER_URL), then farm.toml, then the built-in default.
"""

from __future__ import annotations

import math
import os
import re
import socket
import tomllib
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

from renderer.anim.tracks import MAX_TIME_MS  # the renderer refuses timestamps beyond it too
from renderer.assets.search import ARCHIVE_SUFFIXES, split_source
from renderer.formats.textures.team import REFORGED_TEAMS
from renderer.frame import FrameSpec
from renderer.rules import DEFAULT_LIGHTING, EVENTS_MODES, LIGHTING_RULES, LIGHTS_MODES
from renderer.texture_set import MISSING_MODES

__all__ = [
    "DEFAULT_OUT",
    "FARM_VARIABLES",
    "MAX_SIZE",
    "PROJECT_FILE",
    "Project",
    "MAX_TEAM",
    "MAX_TIME_MS",
    "MISSING_POLICIES",
    "MSAA_VALUES",
    "RenderSettings",
    "SettingError",
    "BROKER_SCHEMES",
    "broker_address",
    "broker_url",
    "check_broker",
    "check_reachable",
    "check_assets",
    "check_game",
    "check_image_base",
    "check_environment",
    "check_events",
    "check_lighting",
    "check_lights",
    "check_missing_policy",
    "default_game",
    "check_background",
    "check_camera",
    "check_missing_textures",
    "check_msaa",
    "check_size",
    "check_team",
    "check_time",
    "containing_root",
    "default_goldens",
    "default_out",
    "default_reports",
    "redact_url",
    "env_int",
    "find_project",
    "project",
    "type_name",
    "variables_help",
]

MISSING_POLICIES = ("warn", "fail")  # what a frame rendered with a missing asset is: done (noted) or failed
MSAA_VALUES = (0, 1, 2, 4, 8, 16)
MAX_SIZE = 8192
MAX_TEAM = REFORGED_TEAMS - 1  # team colour indices 0..27
DEFAULT_OUT = "farm-out"


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


def _str(value, name: str) -> str:
    if not isinstance(value, str):
        raise SettingError(f"{name} must be a string, not {type_name(value)} {value!r}")
    return value


def check_background(value, name: str = "background") -> str:
    value = _str(value, name)
    if value == "transparent":
        return value
    if not re.fullmatch(r"#[0-9a-fA-F]{6}", value):
        raise SettingError(f"{name} must be \"transparent\" or \"#rrggbb\", not {value!r}")
    return value.lower()


def check_camera(value, name: str = "camera") -> str:
    """auto | a CAMS camera name | ex,ey,ez:tx,ty,tz[:ux,uy,uz[:fov]] with finite numbers."""
    value = _str(value, name).strip()
    if not value or "|" in value:
        raise SettingError(f"{name} must be \"auto\", a camera name or ex,ey,ez:tx,ty,tz[:ux,uy,uz[:fov]]"
                           f" (no '|'), not {value!r}")
    if re.fullmatch(r"[-+0-9.eEaAnNiIfF,:\s]+", value) and any(c.isdigit() for c in value.split(":")[0]):
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
    value = _str(value, name)
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
    text = _str(value, name).strip()
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
    missing_textures: str = "checker"
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


# --------------------------------------------------------------------------------------------
# FARM_* environment variables


def env_int(name: str, default: int | None, environ: Mapping[str, str] | None = None, *,
            minimum: int | None = None, maximum: int | None = None) -> int | None:
    """An integer FARM_* variable: `default` when unset or empty, else an int in minimum..maximum
    (the variable's `INT_BOUNDS` unless given; 0.. for one not listed there); any other value is a
    SettingError naming the variable, the value and what it must be (the command line's error guard
    prints it as one sentence; never silently ignored)."""
    lo, hi = INT_BOUNDS.get(name, (0, None))
    minimum = lo if minimum is None else minimum
    maximum = hi if maximum is None else maximum
    env = os.environ if environ is None else environ
    raw = str(env.get(name, "")).strip()
    if not raw:
        return default
    try:
        value = int(raw)
    except ValueError:
        raise SettingError(f"{name} must be an integer, not {raw!r}") from None
    if maximum is not None and not minimum <= value <= maximum:
        raise SettingError(f"{name} must be from {minimum} to {maximum}, not {value}")
    if value < minimum:
        raise SettingError(f"{name} must be >= {minimum}, not {value}")
    return value


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


def default_game(environ: Mapping[str, str] | None = None) -> tuple[str, ...]:
    """Game data named by FARM_GAME_DIR (a folder; several separated by os.pathsep), checked."""
    env = os.environ if environ is None else environ
    raw = [p for p in (env.get("FARM_GAME_DIR") or "").split(os.pathsep) if p.strip()]
    return check_game(raw, "FARM_GAME_DIR") if raw else ()
# Every FARM_* variable: (name, what it does, default). `farm --help` prints this table.
FARM_VARIABLES: tuple[tuple[str, str, str], ...] = (
    ("FARM_OUT", "the store every command uses when --out is not given", "farm.toml store, else ./farm-out"),
    ("FARM_GOLDENS", "the goldens folder when --goldens is not given", "farm.toml goldens, else next to the"
                                                                       " manifest"),
    ("FARM_BROKER_URL", "Celery broker: set, batches go to Celery workers; unset or 'local': a local process"
                        " pool", "farm.toml broker, else local"),
    ("FARM_USER", "who approves and rejects (the golden log)", "git user.name <user.email>, else $USER"),
    ("FARM_SERVE_TOKEN", "farm serve: when set, the token every request needs, on any bind (required to bind"
                         " beyond loopback, --host 0.0.0.0 in a container); open the page with ?token=...", "-"),
    ("FARM_PROGRESS_EVERY", "seconds between progress lines when stderr is not a terminal (CI)", "10"),
    ("FARM_RESULT_BACKEND", "Celery result backend (progress states, batch results)", "the broker URL"),
    ("FARM_QUEUE", "Celery queue the batches go to and workers consume", "farm"),
    ("FARM_SOFT_TIME_LIMIT", "seconds a batch may take; then its remaining frames fail", "600"),
    ("FARM_TIME_LIMIT", "hard limit per batch: the worker's pool process is killed", "soft limit + 60"),
    ("FARM_VISIBILITY_TIMEOUT", "Redis redelivers an unacknowledged batch (a dead worker's) after this many"
                                " seconds; must exceed the hard limit", "hard limit + 60"),
    ("FARM_RESTORE_INTERVAL", "seconds between the sweeps that requeue unacknowledged batches", "10"),
    ("FARM_SOFT_SHUTDOWN_TIMEOUT", "seconds running batches get on a worker's warm shutdown before they are"
                                   " requeued", "0 (Celery's default)"),
    ("FARM_BROKER_RETRY_S", "seconds `farm run --broker` keeps reconnecting to a broker that went away", "300"),
    ("FARM_FRAME_TIME_LIMIT", "seconds one frame may take in a worker; then that frame fails (0: no limit)",
     "120"),
    ("FARM_MEMORY_LIMIT_MB", "private memory per worker process (RLIMIT_DATA); a frame over it fails (0: none)",
     "4096"),
    ("FARM_STALL_GRACE_S", "a local worker silent for 2 x the frame limit + this many seconds is stopped", "30"),
    ("FARM_MAX_FRAMES", "the most frames one job may plan", "200000"),
    ("FARM_BATCH_FRAMES", "the most frames in one batch: longer sequences are cut, to spread over workers",
     "48"),
    ("FARM_GAME_DIR", "Warcraft III game data (folder or archives, os.pathsep-separated), searched last",
     "-"),
    ("FARM_MAX_TASKS_PER_CHILD", "recycle a worker pool process after this many batches", "100"),
    ("FARM_MAX_MEMORY_PER_CHILD", "... or when its resident memory exceeds this (KiB)", "2097152"),
    ("FARM_TASK_MAX_RETRIES", "retries of a batch after a transient failure", "3"),
    ("FARM_RETRY_BACKOFF", "first retry delay in seconds (doubles, capped, jittered)", "2"),
    ("FARM_RETRY_BACKOFF_MAX", "longest retry delay in seconds", "60"),
    ("FARM_MAX_DELIVERIES", "a batch whose worker died this many times fails", "3"),
    ("FARM_RENDERER", "the worker's renderer: gl, synthetic (tests) or module:factory", "gl"),
    ("FARM_GL_BACKEND", "GL backend of the gl renderer: auto, egl, osmesa, glfw", "auto"),
    ("FARM_SYNTHETIC_DELAY_MS", "milliseconds the synthetic renderer waits per frame (tests)", "0"),
    ("FARM_NIGHTLY_MANIFEST", "the nightly manifest; no nightly schedule without it", "-"),
    ("FARM_NIGHTLY_HOUR", "hour of the nightly run (0-23, UTC)", "2"),
    ("FARM_NIGHTLY_MINUTE", "minute of the nightly run (0-59)", "0"),
    ("FARM_NIGHTLY_REPORTS", "where dated nightly reports, status files and index.html go", "$FARM_OUT/nightly"),
    ("FARM_NIGHTLY_GOLDENS", "the nightly goldens folder", "found next to the manifest"),
    ("FARM_NIGHTLY_QUEUE", "the queue of the nightly task", "farm-nightly"),
    ("FARM_NIGHTLY_TIME_LIMIT", "seconds the whole nightly run may take", "43200"),
    ("FARM_NIGHTLY_NOTIFY", "after each night: a command (run with the summary on stdin) or an http(s) URL"
                            " (POSTed the status JSON)", "-"),
    ("FARM_NIGHTLY_STATE", "beat's state folder (its schedule file: celery beat --schedule)",
     "$FARM_NIGHTLY_REPORTS/state"),
    ("FARM_NIGHTLY_STATUS", "set for the notify command: pass, fail or error", "-"),
    ("FARM_NIGHTLY_DATE", "set for the notify command: the night's date (YYYY-MM-DD)", "-"),
    ("FARM_NIGHTLY_REPORT", "set for the notify command: the night's index.html", "-"),
)


def variable_default(name: str) -> str:
    """The default of a FARM_* variable as FARM_VARIABLES gives it (KeyError for a name it does not list)."""
    for n, _, default in FARM_VARIABLES:
        if n == name:
            return default
    raise KeyError(name)


# The integer FARM_* variables and their bounds (minimum, maximum or None): env_int checks a value
# against them wherever it is read, and check_environment checks them all before a command starts.
INT_BOUNDS: dict[str, tuple[int, int | None]] = {
    "FARM_PROGRESS_EVERY": (1, None), "FARM_SOFT_TIME_LIMIT": (0, None), "FARM_TIME_LIMIT": (0, None),
    "FARM_VISIBILITY_TIMEOUT": (0, None), "FARM_RESTORE_INTERVAL": (0, None),
    "FARM_SOFT_SHUTDOWN_TIMEOUT": (0, None), "FARM_BROKER_RETRY_S": (0, None), "FARM_FRAME_TIME_LIMIT": (0, None),
    "FARM_MEMORY_LIMIT_MB": (0, None), "FARM_STALL_GRACE_S": (0, None), "FARM_MAX_FRAMES": (1, None),
    "FARM_BATCH_FRAMES": (1, None), "FARM_MAX_TASKS_PER_CHILD": (0, None), "FARM_MAX_MEMORY_PER_CHILD": (0, None),
    "FARM_TASK_MAX_RETRIES": (0, None), "FARM_RETRY_BACKOFF": (0, None), "FARM_RETRY_BACKOFF_MAX": (0, None),
    "FARM_MAX_DELIVERIES": (1, None), "FARM_NIGHTLY_HOUR": (0, 23), "FARM_NIGHTLY_MINUTE": (0, 59),
    "FARM_NIGHTLY_TIME_LIMIT": (60, 7 * 24 * 3600),
}


def check_environment(environ: Mapping[str, str] | None = None) -> None:
    """Every integer FARM_* variable that is set, checked (SettingError for the first bad one), so a
    command fails before it starts anything rather than midway, when the variable is first read."""
    for name in INT_BOUNDS:
        env_int(name, None, environ)


def variables_help() -> str:
    """The FARM_VARIABLES table as plain text (the epilog of `farm --help`)."""
    width = max(len(n) for n, _, _ in FARM_VARIABLES)
    lines = ["environment variables:"]
    for name, what, default in FARM_VARIABLES:
        lines.append(f"  {name:<{width}}  {what} (default: {default})")
    return "\n".join(lines)


# --------------------------------------------------------------------------------------------
# The project file (farm.toml)

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
        text = _str(value, f"{path}: {key!r}")
        return text if "://" in text else str((base / text).absolute())  # a URL (s3://...) is no folder

    defaults = data.get("defaults") or {}
    if not isinstance(defaults, dict):
        raise SettingError(f"{path}: [defaults] must be a table, not {type_name(defaults)}")
    if "image_base" in defaults or "image-base" in defaults:
        check_image_base(defaults.get("image_base", defaults.get("image-base")), f"{path}: [defaults] image_base")
    assets = check_assets(data["assets"], f"{path}: 'assets'", base) if "assets" in data else ()
    broker = _str(data["broker"], f"{path}: 'broker'") if "broker" in data else None
    return Project(path, folder("store"), folder("goldens"), assets, broker,
                   {k.replace("-", "_"): v for k, v in defaults.items()})


def default_out(environ: Mapping[str, str] | None = None) -> str:
    """The store commands use when none is given: FARM_OUT, else farm.toml's store, else ./farm-out."""
    env = os.environ if environ is None else environ
    if env.get("FARM_OUT"):
        return env["FARM_OUT"]
    proj = project()
    return (proj.store if proj and proj.store else None) or DEFAULT_OUT


def default_reports(environ: Mapping[str, str] | None = None) -> str:
    """Where nightly reports go when none is given: FARM_NIGHTLY_REPORTS, else <store>/nightly for a
    folder store, else ./farm-out/nightly (reports are files to publish, even when the store is a URL)."""
    env = os.environ if environ is None else environ
    if env.get("FARM_NIGHTLY_REPORTS"):
        return env["FARM_NIGHTLY_REPORTS"]
    out = default_out(env)
    return str(Path(DEFAULT_OUT if "://" in out else out) / "nightly")


def default_goldens(environ: Mapping[str, str] | None = None) -> str | None:
    """The goldens folder when none is given: FARM_GOLDENS, else farm.toml's goldens (else None)."""
    env = os.environ if environ is None else environ
    if env.get("FARM_GOLDENS"):
        return env["FARM_GOLDENS"]
    proj = project()
    return proj.goldens if proj else None


def redact_url(url: str | None) -> str | None:
    """A broker URL fit to print or store: its password replaced by ***."""
    return re.sub(r"//([^:/@]*):[^@/]*@", r"//\1:***@", url) if url else url


BROKER_SCHEMES = ("redis", "rediss")  # Celery over Redis: the broker and (by default) the result backend


def check_broker(url: str, name: str = "--broker") -> str:
    """A broker URL `redis[s]://[user:password@]HOST[:PORT][/DB]`, checked as text (scheme, host,
    numeric port and database) or a SettingError naming `name` and the URL (password redacted)."""
    shown = redact_url(url)
    scheme, sep, rest = url.partition("://")
    if not sep or scheme not in BROKER_SCHEMES:
        raise SettingError(f"{name} {shown!r} is not a broker URL: expected redis://HOST:PORT/DB"
                           f" (scheme {' or '.join(BROKER_SCHEMES)})")
    netloc, _, path = rest.partition("/")
    hostport = netloc.rpartition("@")[2]
    host, colon, port = (hostport.rpartition(":") if not hostport.endswith("]") else (hostport, "", ""))
    if not colon:
        host, port = hostport, ""
    if not host.strip("[]"):
        raise SettingError(f"{name} {shown!r} has no host: expected redis://HOST:PORT/DB")
    if colon and not (port.isdigit() and 0 < int(port) <= 65535):
        raise SettingError(f"{name} {shown!r}: the port must be a number from 1 to 65535, not {port!r}")
    db = path.split("?")[0]
    if db and not db.isdigit():
        raise SettingError(f"{name} {shown!r}: the database must be a number (redis://HOST:PORT/0), not {db!r}")
    return url


def broker_address(url: str) -> tuple[str, int]:
    """(host, port) of a broker URL that check_broker accepted (Redis's port 6379 when none is given)."""
    hostport = url.partition("://")[2].partition("/")[0].rpartition("@")[2]
    host, colon, port = hostport.rpartition(":") if not hostport.endswith("]") else (hostport, "", "")
    if not colon:
        host, port = hostport, ""
    return host.strip("[]"), int(port) if port else 6379


BROKER_CONNECT_S = 5.0  # how long the first connection to a broker may take
_reached: set[str] = set()  # brokers this process has connected to once (broker_url checks each once)


def check_reachable(url: str) -> None:
    """One TCP connection to a broker (once per process and URL): one that refuses it (nothing
    listens there), an unknown host or no answer is a SettingError naming the URL, instead of a
    client that retries for ever. (A broker that goes away later, mid-run, is the Celery client's
    to wait for: FARM_BROKER_RETRY_S.)"""
    if url in _reached:
        return
    host, port = broker_address(url)
    try:
        socket.create_connection((host, port), timeout=BROKER_CONNECT_S).close()
    except OSError as e:
        why = e.strerror or str(e) or type(e).__name__
        raise SettingError(f"cannot reach the broker {redact_url(url)} ({host} port {port}): {why}; is Redis"
                           f" running there? (--broker local runs on this machine)") from None
    _reached.add(url)


def broker_url(broker: str | None = None, environ: Mapping[str, str] | None = None, *,
               reach: bool = False) -> str | None:
    """The broker to use: the argument, else FARM_BROKER_URL, else farm.toml's broker, else None
    (run locally). ``"local"`` runs locally even when FARM_BROKER_URL is set. The URL is checked
    (check_broker: the error names where it came from) and, with `reach` (what is about to use
    it: a run, thumbnails, dispatch), connected to once (check_reachable)."""
    env = os.environ if environ is None else environ
    if broker == "local":
        return None
    if broker:
        url = check_broker(broker, "--broker")
    elif env.get("FARM_BROKER_URL"):
        url = check_broker(env["FARM_BROKER_URL"], "FARM_BROKER_URL")
    else:
        proj = project()
        url = check_broker(proj.broker, f"{proj.path}: 'broker'") if proj and proj.broker else None
    if url and reach:
        check_reachable(url)
    return url
