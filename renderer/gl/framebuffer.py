"""An offscreen framebuffer object with RGBA8 colour and DEPTH24_STENCIL8, optional MSAA, readback.

    fb = Framebuffer(256, 256, samples=4)   # needs a current context (renderer.gl.create_context)
    fb.clear((0.0, 0.0, 0.0, 1.0))          # binds it, sets the viewport, clears colour+depth+stencil
    ...                                     # draw
    rgba = fb.read_rgba()                   # (H, W, 4) uint8, row 0 = TOP of the image
    fb.start_read(); ...; rgba = fb.finish_read()   # the same, asynchronously (below)
    fb.delete()

With ``samples > 0`` the FBO drawn into has multisampled renderbuffers; the request is clamped
to GL_MAX_SAMPLES (`granted_samples`), and GL may round it up (`actual_samples`, read back
from GL_RENDERBUFFER_SAMPLES). `read_rgba` resolves it with ``glBlitFramebuffer`` into a
single-sample RGBA8 FBO and reads that. Record `actual_samples` with any golden image: the
pixels depend on it (llvmpipe's GL_MAX_SAMPLES was 4 until Mesa 25.3, 8 since).

`start_read` queues the copy into the framebuffer's pixel buffer object behind the frame's draws
and fences it (glFenceSync); `finish_read` waits on that fence alone, so frames issued after it (into
another framebuffer: renderer.gl.inflight) are not waited for, and copies the rows out. The bytes
are `read_rgba`'s.

GL objects belong to the context that was current when the framebuffer was made; `delete()`
them with that context current. There is no ``__del__``: a garbage collector running GL calls
in the wrong context (or process) is worse than a leak. Nothing here touches GL at import time.
"""

from __future__ import annotations

import ctypes

import numpy as np

from .calls import check, fast, get_integer

MAX_SIZE = 8192


class FramebufferError(RuntimeError):
    """The framebuffer could not be made complete, or was used after `delete()`."""


def _check_size(name: str, value) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise ValueError(f"framebuffer {name} must be an integer in 1..{MAX_SIZE}, got {value!r}")
    value = int(value)
    if not 1 <= value <= MAX_SIZE:
        raise ValueError(f"framebuffer {name} must be in 1..{MAX_SIZE}, got {value}")
    return value


def _require_current_context() -> None:
    from OpenGL import platform

    try:
        current = platform.PLATFORM.GetCurrentContext()
    except Exception:  # noqa: BLE001 - a platform that cannot tell; let GL report errors itself
        return
    if not current or not ctypes.cast(current, ctypes.c_void_p).value:
        raise FramebufferError("no GL context is current on this thread (create_context() first)")


_STATUS = {
    0x8CD6: "GL_FRAMEBUFFER_INCOMPLETE_ATTACHMENT",
    0x8CD7: "GL_FRAMEBUFFER_INCOMPLETE_MISSING_ATTACHMENT",
    0x8CDB: "GL_FRAMEBUFFER_INCOMPLETE_DRAW_BUFFER",
    0x8CDC: "GL_FRAMEBUFFER_INCOMPLETE_READ_BUFFER",
    0x8CDD: "GL_FRAMEBUFFER_UNSUPPORTED",
    0x8D56: "GL_FRAMEBUFFER_INCOMPLETE_MULTISAMPLE",
    0x8DA8: "GL_FRAMEBUFFER_INCOMPLETE_LAYER_TARGETS",
    0x8219: "GL_FRAMEBUFFER_UNDEFINED",
}


class Framebuffer:
    """RGBA8 + DEPTH24_STENCIL8 renderbuffers in an FBO; multisampled when ``samples > 0``.

    Attributes: `width`, `height`, `requested_samples`, `granted_samples` (the request clamped to
    GL_MAX_SAMPLES; 0 for single-sample), `actual_samples` (GL_RENDERBUFFER_SAMPLES of the colour
    renderbuffer, which may exceed the request), `max_samples` (GL_MAX_SAMPLES).
    """

    def __init__(self, width: int, height: int, samples: int = 0):
        self.width = _check_size("width", width)
        self.height = _check_size("height", height)
        if isinstance(samples, bool) or not isinstance(samples, (int, np.integer)) or samples < 0:
            raise ValueError(f"samples must be an integer >= 0, got {samples!r}")
        self.requested_samples = int(samples)

        _require_current_context()
        from OpenGL import GL

        self.max_samples = int(GL.glGetIntegerv(GL.GL_MAX_SAMPLES))
        self.granted_samples = min(self.requested_samples, self.max_samples)
        self.actual_samples = 0
        self._fbos: list[int] = []
        self._rbos: list[int] = []
        self._deleted = False
        self._pbo = 0  # the pixel buffer object of asynchronous read-backs (start_read), made on the first
        self._fence = None  # the GLsync of the read-back in flight
        self.fbo = 0  # drawn into
        self.resolve_fbo = 0  # read from (== fbo when single-sample)

        prev_draw, prev_read = self._bindings()
        try:
            self.fbo, color = self._make_fbo(self.granted_samples, with_depth=True)
            if self.granted_samples > 0:
                self.actual_samples = int(self._renderbuffer_param(color, GL.GL_RENDERBUFFER_SAMPLES))
                self.resolve_fbo, _ = self._make_fbo(0, with_depth=False)
            else:
                self.resolve_fbo = self.fbo
        except Exception:
            self.delete()
            raise
        finally:
            self._restore(prev_draw, prev_read)

    # -- construction helpers ----------------------------------------------------------------

    @staticmethod
    def _bindings() -> tuple[int, int]:
        from OpenGL import GL

        return get_integer(GL.GL_DRAW_FRAMEBUFFER_BINDING), get_integer(GL.GL_READ_FRAMEBUFFER_BINDING)

    @staticmethod
    def _restore(draw: int, read: int) -> None:
        from OpenGL import GL

        gl = fast()
        gl.glBindFramebuffer(GL.GL_DRAW_FRAMEBUFFER, draw)
        gl.glBindFramebuffer(GL.GL_READ_FRAMEBUFFER, read)

    @staticmethod
    def _renderbuffer_param(rbo: int, pname) -> int:
        from OpenGL import GL

        GL.glBindRenderbuffer(GL.GL_RENDERBUFFER, rbo)
        value = GL.glGetRenderbufferParameteriv(GL.GL_RENDERBUFFER, pname)
        GL.glBindRenderbuffer(GL.GL_RENDERBUFFER, 0)
        return int(np.asarray(value).reshape(-1)[0])

    def _renderbuffer(self, internal_format, samples: int) -> int:
        from OpenGL import GL

        rbo = int(GL.glGenRenderbuffers(1))
        self._rbos.append(rbo)
        GL.glBindRenderbuffer(GL.GL_RENDERBUFFER, rbo)
        if samples > 0:
            GL.glRenderbufferStorageMultisample(GL.GL_RENDERBUFFER, samples, internal_format, self.width, self.height)
        else:
            GL.glRenderbufferStorage(GL.GL_RENDERBUFFER, internal_format, self.width, self.height)
        GL.glBindRenderbuffer(GL.GL_RENDERBUFFER, 0)
        return rbo

    def _make_fbo(self, samples: int, with_depth: bool) -> tuple[int, int]:
        from OpenGL import GL

        fbo = int(GL.glGenFramebuffers(1))
        if fbo == 0:
            raise FramebufferError("glGenFramebuffers returned 0 (is a GL context current?)")
        self._fbos.append(fbo)
        GL.glBindFramebuffer(GL.GL_FRAMEBUFFER, fbo)
        color = self._renderbuffer(GL.GL_RGBA8, samples)
        GL.glFramebufferRenderbuffer(GL.GL_FRAMEBUFFER, GL.GL_COLOR_ATTACHMENT0, GL.GL_RENDERBUFFER, color)
        if with_depth:
            depth = self._renderbuffer(GL.GL_DEPTH24_STENCIL8, samples)
            GL.glFramebufferRenderbuffer(GL.GL_FRAMEBUFFER, GL.GL_DEPTH_STENCIL_ATTACHMENT, GL.GL_RENDERBUFFER, depth)
        GL.glDrawBuffers(1, [GL.GL_COLOR_ATTACHMENT0])
        GL.glReadBuffer(GL.GL_COLOR_ATTACHMENT0)
        status = int(GL.glCheckFramebufferStatus(GL.GL_FRAMEBUFFER))
        if status != int(GL.GL_FRAMEBUFFER_COMPLETE):
            raise FramebufferError(
                f"{self.width}x{self.height} framebuffer (samples={samples}) is incomplete: "
                f"{_STATUS.get(status, hex(status))}"
            )
        return fbo, color

    # -- use ---------------------------------------------------------------------------------

    @property
    def deleted(self) -> bool:
        return self._deleted

    def _check_alive(self) -> None:
        if self._deleted:
            raise FramebufferError("framebuffer was deleted")

    def bind(self) -> None:
        """Bind for drawing (GL_FRAMEBUFFER) and set the viewport to the whole framebuffer."""
        self._check_alive()
        from OpenGL import GL

        gl = fast()
        gl.glBindFramebuffer(GL.GL_FRAMEBUFFER, self.fbo)
        gl.glViewport(0, 0, self.width, self.height)

    def clear(self, rgba=(0.0, 0.0, 0.0, 0.0), depth: float = 1.0, stencil: int = 0) -> None:
        """Bind, then clear colour (floats in 0..1; alpha defaults to 1), depth and stencil.

        Colour is cleared with colour writes enabled and no scissor. ``k / 255`` clears to byte
        ``k`` exactly.
        """
        values = [float(v) for v in rgba]
        if len(values) == 3:
            values.append(1.0)
        if len(values) != 4 or not all(0.0 <= v <= 1.0 for v in values):
            raise ValueError(f"clear colour must be 3 or 4 floats in 0..1, got {tuple(rgba)!r}")
        self.bind()
        from OpenGL import GL

        gl = fast()
        gl.glDisable(GL.GL_SCISSOR_TEST)
        gl.glColorMask(GL.GL_TRUE, GL.GL_TRUE, GL.GL_TRUE, GL.GL_TRUE)
        gl.glDepthMask(GL.GL_TRUE)
        gl.glStencilMask(0xFF)
        gl.glClearColor(*values)
        gl.glClearDepth(float(depth))
        gl.glClearStencil(int(stencil))
        gl.glClear(GL.GL_COLOR_BUFFER_BIT | GL.GL_DEPTH_BUFFER_BIT | GL.GL_STENCIL_BUFFER_BIT)
        check(f"clearing the {self.width}x{self.height} frame")

    def resolve(self) -> None:
        """Blit the multisampled colour into the single-sample FBO (no-op without MSAA)."""
        self._check_alive()
        if self.resolve_fbo == self.fbo:
            return
        from OpenGL import GL

        prev_draw, prev_read = self._bindings()
        GL.glBindFramebuffer(GL.GL_READ_FRAMEBUFFER, self.fbo)
        GL.glBindFramebuffer(GL.GL_DRAW_FRAMEBUFFER, self.resolve_fbo)
        w, h = self.width, self.height
        GL.glBlitFramebuffer(0, 0, w, h, 0, 0, w, h, GL.GL_COLOR_BUFFER_BIT, GL.GL_NEAREST)
        self._restore(prev_draw, prev_read)

    def read_rgba(self) -> np.ndarray:
        """The image as a (height, width, 4) uint8 array, row 0 at the top (GL's rows flipped)."""
        self._check_alive()
        from OpenGL import GL

        gl = fast()
        self.resolve()
        prev_draw, prev_read = self._bindings()
        prev_align = get_integer(GL.GL_PACK_ALIGNMENT)
        prev_pbo = get_integer(GL.GL_PIXEL_PACK_BUFFER_BINDING)
        out = np.empty((self.height, self.width, 4), dtype=np.uint8)
        try:
            gl.glBindBuffer(GL.GL_PIXEL_PACK_BUFFER, 0)
            gl.glBindFramebuffer(GL.GL_READ_FRAMEBUFFER, self.resolve_fbo)
            gl.glReadBuffer(GL.GL_COLOR_ATTACHMENT0)
            gl.glPixelStorei(GL.GL_PACK_ALIGNMENT, 1)
            gl.glReadPixels(0, 0, self.width, self.height, GL.GL_RGBA, GL.GL_UNSIGNED_BYTE,
                            ctypes.c_void_p(out.ctypes.data))
        finally:
            gl.glPixelStorei(GL.GL_PACK_ALIGNMENT, prev_align)
            gl.glBindBuffer(GL.GL_PIXEL_PACK_BUFFER, prev_pbo)
            self._restore(prev_draw, prev_read)
        check(f"reading back the {self.width}x{self.height} frame")
        return np.ascontiguousarray(out[::-1])

    def start_read(self) -> None:
        """Begin an asynchronous read-back: resolve, copy the pixels into this framebuffer's pixel
        buffer object and fence the copy, then flush; `finish_read` waits on the fence alone (not on
        frames issued after it) and copies them out. One read at a time per framebuffer; the bytes are
        those of `read_rgba`."""
        self._check_alive()
        if self._fence is not None:
            raise FramebufferError("a read-back of this framebuffer is already in flight")
        from OpenGL import GL

        gl = fast()
        self.resolve()
        prev_draw, prev_read = self._bindings()
        prev_align = get_integer(GL.GL_PACK_ALIGNMENT)
        prev_pbo = get_integer(GL.GL_PIXEL_PACK_BUFFER_BINDING)
        size = self.width * self.height * 4
        try:
            if not self._pbo:
                self._pbo = int(GL.glGenBuffers(1))
                gl.glBindBuffer(GL.GL_PIXEL_PACK_BUFFER, self._pbo)
                gl.glBufferData(GL.GL_PIXEL_PACK_BUFFER, size, None, GL.GL_STREAM_READ)
            gl.glBindBuffer(GL.GL_PIXEL_PACK_BUFFER, self._pbo)
            gl.glBindFramebuffer(GL.GL_READ_FRAMEBUFFER, self.resolve_fbo)
            gl.glReadBuffer(GL.GL_COLOR_ATTACHMENT0)
            gl.glPixelStorei(GL.GL_PACK_ALIGNMENT, 1)
            gl.glReadPixels(0, 0, self.width, self.height, GL.GL_RGBA, GL.GL_UNSIGNED_BYTE,
                            ctypes.c_void_p(0))  # offset 0 into the pixel buffer
        finally:
            gl.glPixelStorei(GL.GL_PACK_ALIGNMENT, prev_align)
            gl.glBindBuffer(GL.GL_PIXEL_PACK_BUFFER, prev_pbo)
            self._restore(prev_draw, prev_read)
        check(f"reading back the {self.width}x{self.height} frame")
        self._fence = GL.glFenceSync(GL.GL_SYNC_GPU_COMMANDS_COMPLETE, 0)
        gl.glFlush()
        if not self._fence:
            self._fence = None
            check(f"fencing the read-back of the {self.width}x{self.height} frame")
            raise FramebufferError(f"glFenceSync failed after reading back the {self.width}x{self.height} frame")

    def cancel_read(self) -> None:
        """Forget a read-back in flight (its frame is not wanted): the framebuffer is free again."""
        if self._fence is not None:
            from OpenGL import GL

            fence, self._fence = self._fence, None
            GL.glDeleteSync(fence)

    @property
    def reading(self) -> bool:
        """Whether a read-back started by `start_read` has not been finished yet."""
        return self._fence is not None

    def finish_read(self) -> np.ndarray:
        """Wait for the read-back `start_read` began; the image as `read_rgba` gives it."""
        self._check_alive()
        if self._fence is None:
            raise FramebufferError("no read-back of this framebuffer is in flight (start_read first)")
        from OpenGL import GL

        gl = fast()
        fence, self._fence = self._fence, None
        try:
            while True:  # every second, until the rasteriser is done with it (a frame has a wall budget)
                status = int(GL.glClientWaitSync(fence, GL.GL_SYNC_FLUSH_COMMANDS_BIT, 1_000_000_000))
                if status in (GL.GL_ALREADY_SIGNALED, GL.GL_CONDITION_SATISFIED):
                    break
                if status != GL.GL_TIMEOUT_EXPIRED:
                    check(f"waiting for the {self.width}x{self.height} frame")
                    raise FramebufferError(f"waiting for the {self.width}x{self.height} frame failed")
        finally:
            GL.glDeleteSync(fence)
        size = self.width * self.height * 4
        out = np.empty((self.height, self.width, 4), dtype=np.uint8)
        prev_pbo = get_integer(GL.GL_PIXEL_PACK_BUFFER_BINDING)
        gl.glBindBuffer(GL.GL_PIXEL_PACK_BUFFER, self._pbo)
        try:
            ptr = _map_range(GL.GL_PIXEL_PACK_BUFFER, size)
            if not ptr:
                check(f"mapping the {self.width}x{self.height} frame")
                raise FramebufferError(f"mapping the read-back of the {self.width}x{self.height} frame failed")
            try:
                rows = np.ctypeslib.as_array((ctypes.c_uint8 * size).from_address(ptr))
                out[::-1] = rows.reshape(self.height, self.width, 4)  # row 0 at the top
            finally:
                GL.glUnmapBuffer(GL.GL_PIXEL_PACK_BUFFER)
        finally:
            gl.glBindBuffer(GL.GL_PIXEL_PACK_BUFFER, prev_pbo)
        check(f"reading back the {self.width}x{self.height} frame")
        return out

    def delete(self) -> None:
        """Free the FBOs, renderbuffers, pixel buffer and fence (with the owning context current).
        Idempotent."""
        if self._deleted:
            return
        self._deleted = True
        from OpenGL import GL

        if self._fence is not None:
            GL.glDeleteSync(self._fence)
            self._fence = None
        if self._pbo:
            GL.glDeleteBuffers(1, [self._pbo])
            self._pbo = 0
        if self._fbos:
            GL.glDeleteFramebuffers(len(self._fbos), self._fbos)
        if self._rbos:
            GL.glDeleteRenderbuffers(len(self._rbos), self._rbos)
        self._fbos, self._rbos = [], []
        self.fbo = self.resolve_fbo = 0

    def __enter__(self) -> Framebuffer:
        return self

    def __exit__(self, *exc) -> None:
        self.delete()

    def __repr__(self) -> str:
        state = "deleted" if self._deleted else f"fbo={self.fbo}"
        return (
            f"<Framebuffer {self.width}x{self.height} samples={self.actual_samples}"
            f" (asked {self.requested_samples}) {state}>"
        )


def _map_range(target, size: int) -> int:
    """glMapBufferRange for reading, as an address (0 when GL refused)."""
    from OpenGL import GL

    ptr = GL.glMapBufferRange(target, 0, size, GL.GL_MAP_READ_BIT)
    return ctypes.cast(ptr, ctypes.c_void_p).value or 0
