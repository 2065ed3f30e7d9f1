"""The preview's state and every change to it, without a window: `farm view` (farm/view/window.py) is a
thin glfw shell that turns mouse and key events into calls on a `ViewState` and draws what
`frame_spec()` renders. Tests drive the same calls (and `apply(event)` for script events).

* Camera: an orbit around `target` (yaw about +Z, pitch from the XY plane, `distance`), fov 45
  (renderer.camera.AUTO_FOV_DEG), up +Z; it starts at the default look's camera (farm.look: the
  ``fit`` camera of the first frame, which the window's renderer resolves, `frame_default`; the
  model's auto camera until then, and for users without GL). Left drag orbits
  (ORBIT_DEG_PER_PX), right drag pans (the target follows the cursor in the view plane), the wheel
  zooms (ZOOM_PER_CLICK a click). The frame always uses `camera_spec()`, the explicit
  `ex,ey,ez:tx,ty,tz` string (rounded to CAMERA_DECIMALS), so `farm render --camera` with the
  printed string draws exactly the same frame.
* Keys: `[` / `]` previous / next sequence, `1`..`9` sequence 0..8, `0` sequence 9; space play /
  pause; left / right scrub by SCRUB_MS (and pause); `t` next team colour (0..27); `b` next
  background (BACKGROUNDS); `w` wireframe; `m` missing-texture placeholder checker / white; `l`
  model lights off / model; `e` event visuals off / model; `r` the starting camera again; `s` save
  (the shell writes the frame); `q` / escape quit.
* Settings: `render`, a farm.settings.RenderSettings (size, team, background, placeholder, lighting,
  lights, events, asset roots), is what the keys change; the frame and the printed command are built
  from it (its camera is the orbit's `camera_spec()`, its game data FARM_GAME_DIR's).
* Time: it starts at the default look's time (farm.look.default_time: the middle of the first
  sequence); a newly selected sequence starts at 0. `tick(ms)` advances a playing sequence,
  wrapping past its end.
"""

from __future__ import annotations

import math
import shlex
from dataclasses import dataclass, field, replace

from farm.environment import default_game
from farm.look import DEFAULT_CAMERA, default_time, frame_camera, sequence_length
from farm.settings import MAX_TEAM, RenderSettings, containing_root, flag_words
from renderer.camera import AUTO_FOV_DEG, resolve_camera
from renderer.frame import FrameSpec
from renderer.model import Model
from renderer.rules import EVENTS_MODES, LIGHTS_MODES
from renderer.texture_set import MISSING_MODES

ORBIT_DEG_PER_PX = 0.5
ZOOM_PER_CLICK = 0.9  # distance x this per wheel click towards the model
SCRUB_MS = 50
PITCH_LIMIT = 89.0
CAMERA_DECIMALS = 4
BACKGROUNDS = ("transparent", "#000000", "#808080", "#ffffff")
SEQUENCE_KEYS = {str(d): (d - 1) % 10 for d in range(10)}  # "1" -> 0 .. "9" -> 8, "0" -> 9


@dataclass
class ViewState:
    model: str  # the path as given (it goes into the printed command)
    sequences: tuple = ()  # names
    lengths: tuple = ()  # ms, per sequence
    render: RenderSettings = RenderSettings(width=512, height=512)  # what the frame is drawn with (module doc)
    target: tuple = (0.0, 0.0, 0.0)
    yaw: float = 0.0  # degrees about +Z, 0 = the eye on +X
    pitch: float = 0.0  # degrees above the XY plane
    distance: float = 100.0
    sequence: int | None = None
    time_ms: int = 0
    playing: bool = False
    wireframe: bool = False
    home: tuple = field(default=(), repr=False)  # (target, yaw, pitch, distance) of the starting camera
    _play_ms: float = field(default=0.0, repr=False)  # sub-millisecond remainder of tick()

    # ---- construction -------------------------------------------------------------------------
    @classmethod
    def for_model(cls, model: Model, path: str, width: int = 512, height: int = 512,
                  render: RenderSettings | None = None, **kw) -> ViewState:
        """The state of a new window on `model`: `render`'s settings (default: RenderSettings's) at
        `width` x `height`, the default look's time and camera."""
        names = tuple(str(s.name) for s in model.sequences)
        lengths = tuple(sequence_length(model, i) for i in range(len(model.sequences)))
        seq = 0 if names else None
        render = (render or RenderSettings()).replace(width=width, height=height)
        state = cls(model=str(path), sequences=names, lengths=lengths, render=render,
                    sequence=seq, time_ms=default_time(model, seq), **kw)
        cam = resolve_camera("auto", model, state.sequence, width / height)
        state.look(cam.eye, cam.target)
        state.home = (state.target, state.yaw, state.pitch, state.distance)
        return state

    def frame_default(self, renderer, model: Model, context=None) -> None:
        """Point the camera, and its home (`r`), at the default look's camera for this frame (farm.look:
        ``fit`` frames what this frame draws, so `renderer` resolves it from the frame's pose and effects;
        `context`: the model's, renderer.context)."""
        spec = replace(self.frame_spec(), camera=DEFAULT_CAMERA, wireframe=False)
        self.look(*frame_camera(renderer, model, spec, context))
        self.home = (self.target, self.yaw, self.pitch, self.distance)

    def look(self, eye, target) -> None:
        """Point the orbit camera from `eye` at `target`."""
        v = [float(e) - float(t) for e, t in zip(eye, target, strict=True)]
        d = math.sqrt(sum(x * x for x in v)) or 1.0
        self.target = tuple(float(t) for t in target)
        self.distance = d
        self.yaw = math.degrees(math.atan2(v[1], v[0]))
        self.pitch = max(-PITCH_LIMIT, min(PITCH_LIMIT, math.degrees(math.asin(max(-1.0, min(1.0, v[2] / d))))))

    # ---- the camera ---------------------------------------------------------------------------
    def _basis(self):
        y, p = math.radians(self.yaw), math.radians(self.pitch)
        back = (math.cos(p) * math.cos(y), math.cos(p) * math.sin(y), math.sin(p))  # target -> eye
        right = (-math.sin(y), math.cos(y), 0.0)
        up = (back[1] * right[2] - back[2] * right[1], back[2] * right[0] - back[0] * right[2],
              back[0] * right[1] - back[1] * right[0])
        return back, right, up

    @property
    def eye(self) -> tuple:
        back, _, _ = self._basis()
        return tuple(t + self.distance * b for t, b in zip(self.target, back, strict=True))

    def camera_spec(self) -> str:
        """The explicit camera `ex,ey,ez:tx,ty,tz` of this state (up +Z, fov 45: the defaults)."""
        def fmt(v) -> str:
            out = []
            for x in v:
                s = f"{round(float(x), CAMERA_DECIMALS):.{CAMERA_DECIMALS}f}".rstrip("0").rstrip(".")
                out.append("0" if s in ("-0", "") else s)
            return ",".join(out)

        return f"{fmt(self.eye)}:{fmt(self.target)}"

    def orbit(self, dx_px: float, dy_px: float) -> None:
        """Left drag by (dx, dy) pixels: turn the eye about the target."""
        self.yaw = (self.yaw - dx_px * ORBIT_DEG_PER_PX + 180.0) % 360.0 - 180.0
        self.pitch = max(-PITCH_LIMIT, min(PITCH_LIMIT, self.pitch + dy_px * ORBIT_DEG_PER_PX))

    @staticmethod
    def orbit_pixels(yaw_deg: float, pitch_deg: float) -> tuple[float, float]:
        """The left drag (dx, dy pixels) that turns the camera by yaw / pitch degrees."""
        return -yaw_deg / ORBIT_DEG_PER_PX, pitch_deg / ORBIT_DEG_PER_PX

    def pan(self, dx_px: float, dy_px: float) -> None:
        """Right drag by (dx, dy) pixels: move the target (and eye) so the model follows the cursor."""
        _, right, up = self._basis()
        per_px = 2.0 * self.distance * math.tan(math.radians(AUTO_FOV_DEG) / 2) / self.render.height
        self.target = tuple(t - right[i] * dx_px * per_px + up[i] * dy_px * per_px
                            for i, t in enumerate(self.target))

    def zoom(self, clicks: float) -> None:
        """Mouse wheel: `clicks` > 0 moves towards the target."""
        self.distance = max(self.distance * ZOOM_PER_CLICK ** clicks, 1e-3)

    def drag(self, button: str, dx_px: float, dy_px: float) -> None:
        (self.orbit if button == "left" else self.pan)(dx_px, dy_px)

    # ---- time and sequences -------------------------------------------------------------------
    @property
    def length(self) -> int:
        return self.lengths[self.sequence] if self.sequence is not None else 0

    def select(self, index: int) -> None:
        if self.sequences and 0 <= index < len(self.sequences) and index != self.sequence:
            self.sequence, self.time_ms, self._play_ms = index, 0, 0.0

    def tick(self, ms: float) -> None:
        """Advance a playing sequence by `ms` (wrapping past its end)."""
        if not self.playing or self.sequence is None:
            return
        self._play_ms += ms
        whole = int(self._play_ms)
        self._play_ms -= whole
        t = self.time_ms + whole
        self.time_ms = t % (self.length + 1) if self.length > 0 else 0

    def scrub(self, ms: int) -> None:
        self.playing = False
        self.time_ms = max(0, min(self.length, self.time_ms + ms))

    # ---- keys ---------------------------------------------------------------------------------
    def key(self, name: str) -> str | None:
        """Apply one key (see the module docstring); returns "save" or "quit" for the shell, else None."""
        n = self.sequence if self.sequence is not None else 0
        if name == "[":
            self.select(n - 1)
        elif name == "]":
            self.select(n + 1)
        elif name in SEQUENCE_KEYS:
            self.select(SEQUENCE_KEYS[name])
        elif name == "space":
            self.playing = not self.playing and self.sequence is not None
        elif name == "left":
            self.scrub(-SCRUB_MS)
        elif name == "right":
            self.scrub(SCRUB_MS)
        elif name == "t":
            self.render = self.render.replace(team=(self.render.team + 1) % (MAX_TEAM + 1))
        elif name == "b":
            self.render = self.render.replace(background=_next(BACKGROUNDS, self.render.background))
        elif name == "w":
            self.wireframe = not self.wireframe
        elif name == "m":
            self.render = self.render.replace(missing_textures=_next(MISSING_MODES, self.render.missing_textures))
        elif name == "l":
            self.render = self.render.replace(lights=_next(LIGHTS_MODES, self.render.lights))
        elif name == "e":
            self.render = self.render.replace(events=_next(EVENTS_MODES, self.render.events))
        elif name == "r" and self.home:
            self.target, self.yaw, self.pitch, self.distance = self.home
        elif name == "s":
            return "save"
        elif name in ("q", "escape"):
            return "quit"
        return None

    def apply(self, event: tuple) -> str | None:
        """One parsed script event (`parse_script`); returns what `key` returns, or the shell's own
        actions ("screenshot", "quit")."""
        kind, *args = event
        if kind == "orbit":  # degrees, through the drag handler
            self.drag("left", *self.orbit_pixels(args[0], args[1]))
        elif kind in ("drag", "mouse"):
            self.drag(args[0], args[1], args[2])
        elif kind == "pan":
            self.drag("right", args[0], args[1])
        elif kind in ("zoom", "wheel"):
            self.zoom(args[0])
        elif kind == "tick":
            self.tick(args[0])
        elif kind in ("key", "press"):
            return self.key(args[0])
        elif kind in ("screenshot", "quit"):
            return kind
        return None

    # ---- what the frame is --------------------------------------------------------------------
    def settings(self) -> RenderSettings:
        """`render` seen from the orbit camera, with FARM_GAME_DIR's game data (as `farm render` reads it)."""
        return self.render.replace(camera=self.camera_spec(), game=default_game())

    def frame_spec(self) -> FrameSpec:
        """The FrameSpec `farm render` builds from `command(...)` (same settings, same stop root)."""
        spec = self.settings().frame_spec(self.sequence, self.time_ms,
                                          containing_root(self.model, self.render.assets))
        return replace(spec, wireframe=self.wireframe) if self.wireframe else spec

    def command(self, output: str) -> list[str]:
        """The `farm render` arguments that draw this state's frame into `output`."""
        argv = ["farm", "render", self.model, "-o", str(output)]
        if self.sequence is not None:
            argv += ["--sequence", str(self.sequence)]
        argv += ["--time", str(self.time_ms), *flag_words(self.render.replace(camera=self.camera_spec()))]
        if self.wireframe:
            argv.append("--wireframe")
        return argv

    def command_line(self, output: str) -> str:
        return shlex.join(self.command(output))

    def status(self) -> str:
        """One line for the window title."""
        seq = f"{self.sequence}:{self.sequences[self.sequence]}" if self.sequence is not None else "no sequence"
        rs = self.render
        return (f"{seq} {self.time_ms} ms {'playing' if self.playing else 'paused'} | team {rs.team} | "
                f"bg {rs.background} | lights {rs.lights}{' | events' if rs.events != 'off' else ''}"
                f"{' | wireframe' if self.wireframe else ''}")


def _next(options: tuple, current: str) -> str:
    return options[(options.index(current) + 1) % len(options)] if current in options else options[0]


SCRIPT_STEPS = (  # every step of a --script: (syntax, what it does); `farm view --help` lists them
    ("orbit DYAW DPITCH", "turn the camera around the target by degrees"),
    ("drag left|right DX DY", "a mouse drag in pixels (left orbits, right pans)"),
    ("pan DX DY", "move the camera sideways by pixels"),
    ("zoom CLICKS", "wheel clicks (positive: closer)"),
    ("key NAME", "a key of the window (the keys above: s saves the frame, space plays, ...)"),
    ("tick MS", "advance a playing sequence by MS milliseconds (space plays)"),
    ("screenshot PATH", "save the window's frame as a PNG"),
    ("quit", "close the window"),
    ("press NAME", "a key sent through the window's key callback (as a user's key press)"),
    ("mouse left|right DX DY", "a drag sent through the window's mouse callbacks"),
    ("wheel CLICKS", "wheel clicks sent through the window's scroll callback"),
)


def script_help() -> str:
    """The steps a --script takes, one per line (the epilog of `farm view --help`)."""
    width = max(len(syntax) for syntax, _ in SCRIPT_STEPS)
    return "\n".join(["script steps (--script, separated by ';'):"]
                     + [f"  {syntax:<{width}}  {what}" for syntax, what in SCRIPT_STEPS])


def parse_script(text: str) -> list[tuple]:
    """The steps of SCRIPT_STEPS, separated by `;`. The window shell sends `press`, `mouse` and `wheel`
    through its glfw callbacks (button press, cursor moves, release; key codes); `ViewState.apply`
    treats them as key / drag / zoom."""
    events = []
    for part in text.split(";"):
        words = part.split()
        if not words:
            continue
        kind, args = words[0].lower(), words[1:]
        try:
            if kind in ("orbit", "pan") and len(args) == 2:
                events.append((kind, float(args[0]), float(args[1])))
            elif kind in ("drag", "mouse") and len(args) == 3 and args[0] in ("left", "right"):
                events.append((kind, args[0], float(args[1]), float(args[2])))
            elif kind in ("zoom", "tick", "wheel") and len(args) == 1:
                events.append((kind, float(args[0])))
            elif kind in ("key", "press", "screenshot") and len(args) == 1:
                events.append((kind, args[0] if kind == "screenshot" else args[0].lower()))
            elif kind == "quit" and not args:
                events.append(("quit",))
            else:
                raise ValueError
        except ValueError:
            steps = ", ".join(syntax for syntax, _ in SCRIPT_STEPS)
            raise ValueError(f"cannot read script step {part.strip()!r}: expected one of {steps}") from None
    return events


__all__ = ["SCRIPT_STEPS", "ViewState", "parse_script", "script_help"]
