"""The framebuffers of frames in flight: a frame issued, its read-back started (`Framebuffer.start_read`),
while the next one is posed and issued into another.

    pool = InFlight()
    fb = pool.get(256, 256, 0)   # a framebuffer of that size and MSAA with no read-back in flight
    ...                          # draw, fb.start_read(); later fb.finish_read()
    pool.drop(fb)                # a frame that failed half-way: its framebuffer is not used again
    pool.close()

At most `MAX_IN_FLIGHT` framebuffers of one size are kept, so memory stays bounded however long a
batch is: asking for one more while all of them are still reading is an error (the caller finishes or
cancels a read-back first). A batch of one size allocates its framebuffers once; asking for another
size frees the idle framebuffers of the others (those still reading are freed once they are idle and
another size is asked for, or by `close`). Needs the context that made them current, as Framebuffer.
"""

from __future__ import annotations

from .framebuffer import Framebuffer, FramebufferError

MAX_IN_FLIGHT = 2  # frame N reading back while frame N+1 is issued (renderer.frame.Renderer.render(then=))


class InFlight:
    def __init__(self):
        self._fbs: list[tuple[tuple[int, int, int], Framebuffer]] = []

    def get(self, width: int, height: int, samples: int) -> Framebuffer:
        key = (int(width), int(height), int(samples))
        for other, fb in list(self._fbs):
            if other != key and not fb.reading:
                self.drop(fb)
        mine = [fb for k, fb in self._fbs if k == key]
        for fb in mine:
            if not fb.reading:
                return fb
        if len(mine) >= MAX_IN_FLIGHT:
            raise FramebufferError(f"{len(mine)} frames of {width}x{height} are already in flight"
                                   f" (at most {MAX_IN_FLIGHT})")
        fb = Framebuffer(width, height, samples)
        self._fbs.append((key, fb))
        return fb

    def drop(self, fb: Framebuffer) -> None:
        """Delete `fb` (a read-back in flight in it is forgotten)."""
        self._fbs = [(k, f) for k, f in self._fbs if f is not fb]
        fb.delete()

    def __len__(self) -> int:
        return len(self._fbs)

    def close(self) -> None:
        for _, fb in self._fbs:
            fb.delete()
        self._fbs = []
