"""The glfw shell of `farm view`: a window, its events, and the frames of a `ViewState`.

Every frame is drawn by the ordinary offscreen `renderer.frame.Renderer` (its own EGL context) from
`state.frame_spec()`, read back, and drawn into the window's own context with glDrawPixels (a
compatibility context made through EGL, so PyOpenGL, bound to EGL by the renderer, sees it as
current). That is the simplest path that works whatever the two contexts are: no sharing between
them is needed, and what the window shows is exactly the frame `s` saves.

glfw callbacks and `--script` steps call the same handlers (`handle_key`, `handle_drag`,
`handle_scroll`, `handle_event`), so a script is a faithful stand-in for a user: tests run it under
Xvfb. In a script, time moves only with `tick MS` (frames are reproducible); interactively a playing
sequence follows the clock.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

from farm.view.state import ViewState
from renderer.frame import Renderer
from renderer.model import Model
from renderer.png import write_png

CLEAR = (0.16, 0.16, 0.18, 1.0)  # behind a transparent background


class ViewWindow:
    def __init__(self, state: ViewState, model: Model, out_dir: str | Path = ".", backend: str = "auto",
                 visible: bool = True, stdout=None, context=None):
        import glfw  # noqa: PLC0415 - libglfw is loaded only by a process that opens a window

        self.glfw = glfw
        self.state, self.model = state, model
        self.context = context  # where the model came from, how its inputs are found (renderer.context)
        self.out_dir = Path(out_dir)
        self.stdout = stdout or sys.stdout
        self.saved: list[tuple[Path, str]] = []  # (png, the farm render command line)
        self.renderer = Renderer(backend)
        self.renderer.context  # noqa: B018 - create the EGL context first: it binds PyOpenGL's platform
        state.frame_default(self.renderer, model, context)  # start at the default look (farm.look: the fit camera)
        self._button = None
        self._cursor = None
        self._frame = None
        self.dirty = True
        if not glfw.init():
            raise RuntimeError(f"glfw.init() failed: {glfw.get_error()}")
        glfw.default_window_hints()
        glfw.window_hint(glfw.VISIBLE, glfw.TRUE if visible else glfw.FALSE)
        glfw.window_hint(glfw.RESIZABLE, glfw.FALSE)
        from renderer.gl.base import pyopengl_platform  # noqa: PLC0415 - GL stays out of state-only users

        if pyopengl_platform()[0] == "egl":
            glfw.window_hint(glfw.CONTEXT_CREATION_API, glfw.EGL_CONTEXT_API)
        self.window = glfw.create_window(state.render.width, state.render.height, "farm view", None, None)
        if not self.window:
            glfw.terminate()
            raise RuntimeError(f"glfw.create_window failed: {glfw.get_error()}")
        glfw.set_key_callback(self.window, self._on_key)
        glfw.set_mouse_button_callback(self.window, self._on_button)
        glfw.set_cursor_pos_callback(self.window, self._on_cursor)
        glfw.set_scroll_callback(self.window, self._on_scroll)
        self._keys = {glfw.KEY_LEFT_BRACKET: "[", glfw.KEY_RIGHT_BRACKET: "]", glfw.KEY_SPACE: "space",
                      glfw.KEY_LEFT: "left", glfw.KEY_RIGHT: "right", glfw.KEY_ESCAPE: "escape"}
        self._keys.update({code: chr(code).lower() for code in range(glfw.KEY_A, glfw.KEY_Z + 1)})
        self._keys.update({code: chr(code) for code in range(glfw.KEY_0, glfw.KEY_9 + 1)})

    # ---- handlers (glfw callbacks and script steps) -------------------------------------------
    def handle_key(self, name: str) -> None:
        action = self.state.key(name)
        if action == "save":
            self.save()
        elif action == "quit":
            self.glfw.set_window_should_close(self.window, True)
        self.dirty = True

    def handle_drag(self, button: str, dx: float, dy: float) -> None:
        self.state.drag(button, dx, dy)
        self.dirty = True

    def handle_scroll(self, clicks: float) -> None:
        self.state.zoom(clicks)
        self.dirty = True

    def handle_event(self, event: tuple) -> None:
        """One `farm.view.state.parse_script` step, through the handlers above."""
        kind, *args = event
        if kind == "key":
            self.handle_key(args[0])
        elif kind == "orbit":
            self.handle_drag("left", *self.state.orbit_pixels(args[0], args[1]))
        elif kind == "drag":
            self.handle_drag(*args)
        elif kind == "pan":
            self.handle_drag("right", *args)
        elif kind == "zoom":
            self.handle_scroll(args[0])
        elif kind == "tick":
            self.state.tick(args[0])
            self.dirty = True
        elif kind == "screenshot":
            self.draw()
            self.screenshot(args[0])
        elif kind == "quit":
            self.glfw.set_window_should_close(self.window, True)
        elif kind in ("press", "mouse", "wheel"):
            self._through_callbacks(kind, args)

    def _through_callbacks(self, kind: str, args) -> None:
        """Script steps sent as glfw would send them: key codes, button press / cursor / release."""
        glfw, win = self.glfw, self.window
        if kind == "press":
            codes = {name: code for code, name in self._keys.items()}
            if args[0] not in codes:
                raise ValueError(f"press {args[0]!r}: not a key farm view knows")
            self._on_key(win, codes[args[0]], 0, glfw.PRESS, 0)
        elif kind == "wheel":
            self._on_scroll(win, 0.0, args[0])
        else:
            button = glfw.MOUSE_BUTTON_LEFT if args[0] == "left" else glfw.MOUSE_BUTTON_RIGHT
            self._on_button(win, button, glfw.PRESS, 0)
            x, y = self._cursor
            steps = 4
            for i in range(1, steps + 1):
                self._on_cursor(win, x + args[1] * i / steps, y + args[2] * i / steps)
            self._on_button(win, button, glfw.RELEASE, 0)

    def _on_key(self, _win, key, _scancode, action, _mods) -> None:
        if action in (self.glfw.PRESS, self.glfw.REPEAT) and key in self._keys:
            self.handle_key(self._keys[key])

    def _on_button(self, _win, button, action, _mods) -> None:
        names = {self.glfw.MOUSE_BUTTON_LEFT: "left", self.glfw.MOUSE_BUTTON_RIGHT: "right"}
        if action == self.glfw.PRESS and button in names:
            self._button, self._cursor = names[button], self.glfw.get_cursor_pos(self.window)
        elif action == self.glfw.RELEASE:
            self._button = None

    def _on_cursor(self, _win, x, y) -> None:
        if self._button is None or self._cursor is None:
            return
        dx, dy = x - self._cursor[0], y - self._cursor[1]
        self._cursor = (x, y)
        self.handle_drag(self._button, dx, dy)

    def _on_scroll(self, _win, _dx, dy) -> None:
        self.handle_scroll(dy)

    # ---- frames ---------------------------------------------------------------------------------
    def render(self):
        return self.renderer.render(self.model, self.state.frame_spec(), context=self.context)

    def draw(self) -> None:
        """Render the state's frame offscreen and draw it into the window (back buffer)."""
        from OpenGL import GL  # noqa: PLC0415 - after the renderer bound PyOpenGL's platform

        glfw = self.glfw
        frame = self.render()
        self._frame = frame
        glfw.make_context_current(self.window)
        fw, fh = glfw.get_framebuffer_size(self.window)
        GL.glViewport(0, 0, fw, fh)
        GL.glClearColor(*CLEAR)
        GL.glClear(GL.GL_COLOR_BUFFER_BIT)
        GL.glEnable(GL.GL_BLEND)
        GL.glBlendFunc(GL.GL_SRC_ALPHA, GL.GL_ONE_MINUS_SRC_ALPHA)
        h, w = frame.rgba.shape[:2]
        GL.glPixelZoom(fw / w, fh / h)
        GL.glWindowPos2i(0, 0)
        GL.glPixelStorei(GL.GL_UNPACK_ALIGNMENT, 1)
        GL.glDrawPixels(w, h, GL.GL_RGBA, GL.GL_UNSIGNED_BYTE, np.ascontiguousarray(frame.rgba[::-1]))
        GL.glDisable(GL.GL_BLEND)
        glfw.set_window_title(self.window, f"farm view: {Path(self.state.model).name} | {self.state.status()}")
        self.dirty = False

    def window_pixels(self) -> np.ndarray:
        """The window's back buffer as drawn (top row first), RGBA."""
        from OpenGL import GL  # noqa: PLC0415 - after the renderer bound PyOpenGL's platform

        self.glfw.make_context_current(self.window)
        fw, fh = self.glfw.get_framebuffer_size(self.window)
        GL.glReadBuffer(GL.GL_BACK)
        GL.glPixelStorei(GL.GL_PACK_ALIGNMENT, 1)
        data = GL.glReadPixels(0, 0, fw, fh, GL.GL_RGBA, GL.GL_UNSIGNED_BYTE)
        return np.frombuffer(data, np.uint8).reshape(fh, fw, 4)[::-1].copy()

    def screenshot(self, path: str | Path) -> Path:
        path = Path(path)
        write_png(path, self.window_pixels())
        print(f"screenshot: {path}", file=self.stdout, flush=True)
        return path

    def save(self) -> Path:
        """Write the state's frame with its trace (rendered afresh: effects simulated from t = 0, as a
        new `farm render` process does) and print the command that reproduces it."""
        s = self.state
        seq = "none" if s.sequence is None else str(s.sequence)
        n = len(self.saved)
        path = self.out_dir / f"{Path(s.model).stem}_seq{seq}_{s.time_ms}ms_{n:02d}.png"
        self.renderer.reset_effects()
        frame = self.render()
        write_png(path, frame.rgba, frame.trace)
        line = s.command_line(str(path))
        self.saved.append((path, line))
        print(f"saved {path}; reproduce with:\n  {line}", file=self.stdout, flush=True)
        self.renderer.reset_effects()
        return path

    # ---- the loop -------------------------------------------------------------------------------
    def run(self, script: list[tuple] | None = None) -> None:
        glfw = self.glfw
        try:
            self.draw()
            glfw.swap_buffers(self.window)
            if script is not None:
                for event in script:
                    glfw.poll_events()
                    self.handle_event(event)
                    if glfw.window_should_close(self.window):
                        break
                    if self.dirty:
                        self.draw()
                        glfw.swap_buffers(self.window)
                return
            last = glfw.get_time()
            while not glfw.window_should_close(self.window):
                glfw.wait_events_timeout(1 / 60 if self.state.playing else 0.25)
                now = glfw.get_time()
                if self.state.playing:
                    self.state.tick((now - last) * 1000.0)
                    self.dirty = True
                last = now
                if self.dirty:
                    self.draw()
                    glfw.swap_buffers(self.window)
        finally:
            self.close()

    def close(self) -> None:
        if self.window is not None:
            self.glfw.destroy_window(self.window)
            self.window = None
            self.glfw.terminate()
        self.renderer.close()


__all__ = ["ViewWindow"]
