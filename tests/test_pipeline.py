"""Rendering ahead (`Renderer.render(..., then=next_spec)`, issue 37): the next frame is posed and issued
while this one rasterises and reads back (asynchronously: a pixel buffer object and a fence), and a
batch keeps (encodes, stores) each frame behind the render thread (farm.run.behind). Every frame must
be the bytes of the same frame rendered alone, one at a time; errors belong to the frame that has them,
with the words they have when it is rendered alone; frames in flight are bounded."""

from __future__ import annotations

import contextlib
import hashlib
import json
import threading
import time

import pytest
from conftest import corpus_files
from render_util import renderer

from farm.plan.batches import expand_manifest
from farm.plan.manifest import load_manifest
from farm.run import execute
from farm.run.behind import Behind
from farm.run.execute import render_batch
from farm.store import FolderStore
from renderer.formats import load_model
from renderer.frame import FrameSpec, Renderer
from renderer.gl.framebuffer import Framebuffer
from renderer.gl.inflight import MAX_IN_FLIGHT
from renderer.png import png_bytes
from renderer.samples import write_samples

# corpus models of the peer table: skinned, many additive layers, emitters, HD
CORPUS_MODELS = ("OrcMale.mdx", "Ghost.mdx", "DarionMograineEvil.mdx", "LargeFireEmitter.mdx", "Girl2.mdx")


@pytest.fixture(scope="module")
def samples(tmp_path_factory):
    d = tmp_path_factory.mktemp("samples")
    write_samples(d)
    return d


def models(samples) -> list:
    paths = sorted(samples.glob("*.mdx"))
    for name in CORPUS_MODELS:
        found = corpus_files(name)
        paths += found[:1]
    return [load_model(p) for p in paths]


def digest(frame) -> str:
    h = hashlib.sha256(frame.rgba.tobytes())
    h.update(json.dumps(frame.trace, sort_keys=True).encode())
    return h.hexdigest()


def specs(model, size: int, **kw) -> list[FrameSpec]:
    """Six times across the first sequence (out of order once: a batch may go back)."""
    length = model.sequences[0].interval[1] - model.sequences[0].interval[0] if model.sequences else 0
    times = [0, length // 5, length // 2, length // 3, length - 1 if length else 0, 40]
    return [FrameSpec(time_ms=t, width=size, height=size, background="#203040", **kw) for t in times]


@contextlib.contextmanager
def synchronous_read_back():
    """Frames read back as before issue 37: glReadPixels into client memory, which waits for the
    rasteriser (Framebuffer.read_rgba), instead of a pixel buffer object and a fence."""
    real = Framebuffer.start_read, Framebuffer.finish_read

    def start_read(fb):
        fb._fence = "synchronous"

    def finish_read(fb):
        fb._fence = None
        return fb.read_rgba()

    Framebuffer.start_read, Framebuffer.finish_read = start_read, finish_read
    try:
        yield
    finally:
        Framebuffer.start_read, Framebuffer.finish_read = real


def alone(model, batch: list[FrameSpec]) -> list[str]:
    r = renderer()
    r.reset_effects()
    with synchronous_read_back():
        out = [digest(r.render(model, s)) for s in batch]
    r.forget(model)
    return out


def ahead(model, batch: list[FrameSpec]) -> list[str]:
    r = renderer()
    r.reset_effects()
    out = []
    for i, s in enumerate(batch):
        out.append(digest(r.render(model, s, then=batch[i + 1] if i + 1 < len(batch) else None)))
        if i + 1 < len(batch):  # the next frame really was issued before this call returned
            assert r._ahead is not None and r._ahead.error is None and r._ahead.drawn.fb is not None
    r.forget(model)
    return out


@pytest.mark.parametrize("kw", [{}, {"msaa": 4, "camera": "fit"}, {"lights": "model", "events": "model"}],
                         ids=["auto", "fit-msaa", "lights-events"])
def test_rendering_ahead_gives_the_bytes_of_frames_rendered_alone(samples, kw):
    seen = 0
    for model in models(samples):
        for size in (64, 160):
            batch = specs(model, size, **kw)
            one, piped = alone(model, batch), ahead(model, batch)
            assert piped == one, f"{model.name} at {size}: {kw}"
            assert one == alone(model, batch)  # and alone is itself repeatable
            seen += len(set(one))
    assert seen > 30  # the frames really differ from each other (times, sizes, models)


def test_an_error_preparing_the_next_frame_is_raised_by_the_call_that_asks_for_it(samples):
    model = load_model(samples / "crate.mdx")
    r = renderer()
    good, bad = FrameSpec(time_ms=100, width=48, height=48), FrameSpec(sequence="Nope", width=48, height=48)
    expected = digest(Renderer.render(r, model, good))
    assert digest(r.render(model, good, then=bad)) == expected  # this frame is unharmed
    with pytest.raises(ValueError, match="Nope"):
        r.render(model, bad)
    # a prepared frame that the next call does not ask for is dropped, not drawn
    r.render(model, good, then=FrameSpec(time_ms=900, width=48, height=48))
    other = FrameSpec(time_ms=500, width=32, height=32)
    assert digest(r.render(model, other)) == digest(r.render(model, other))
    assert r._ahead is None
    r.forget(model)


def test_a_frame_batch_stores_the_same_images_rendered_ahead_or_one_at_a_time(samples, tmp_path):
    """farm.run.execute passes each frame's successor to a renderer that renders ahead."""
    (tmp_path / "models").mkdir()
    for name in ("crate.mdx", "effects.mdx"):
        (tmp_path / "models" / name).write_bytes((samples / name).read_bytes())
    (tmp_path / "job.toml").write_text('size = "72x72"\ntimestamps = [0, 150, 600, 1200, 1999]\n'
                                       '[[models]]\npaths = ["models/*.mdx"]\n')
    batches = expand_manifest(load_manifest(tmp_path / "job.toml")).batches

    class OneAtATime:
        """The real renderer, asked for one frame at a time (no `then`)."""

        def render(self, model, spec, model_digest=None):
            return Renderer.render(renderer(), model, spec, model_digest)

        def forget(self, model):
            renderer().forget(model)

    calls = []

    class Watched(OneAtATime):
        def render(self, model, spec, model_digest=None, then=None):
            calls.append(then)
            return renderer().render(model, spec, model_digest, then=then)

    results = {}
    for name, factory in (("alone", OneAtATime), ("ahead", Watched)):
        renderer().reset_effects()
        store = FolderStore(tmp_path / name)
        results[name] = [[(f.key, f.status, f.digest) for f in render_batch(b, factory, store, "j").frames]
                         for b in batches]
    assert results["ahead"] == results["alone"]
    assert all(s == "done" for frames in results["alone"] for _, s, _ in frames)
    assert sum(c is not None for c in calls) == len(calls) - len(batches)  # all but each batch's last


def batch_job(tmp_path, samples, size: int = 96) -> list:
    """A job of the sample models and the corpus models of CORPUS_MODELS[:2] where present: one batch
    per model and sequence, eight times each."""
    (tmp_path / "models").mkdir()
    for p in sorted(samples.glob("*.mdx")):
        (tmp_path / "models" / p.name).write_bytes(p.read_bytes())
    paths = '"models/*.mdx"'
    for name in CORPUS_MODELS[:2]:
        for found in corpus_files(name)[:1]:
            paths += f', "{found}"'
    (tmp_path / "job.toml").write_text(f'size = "{size}x{size}"\nbackground = "#203040"\n'
                                       'timestamps = [0, 33, 66, 150, 600, 400, 1200, 1999]\n'
                                       f'[[models]]\npaths = [{paths}]\nsequences = ["Stand"]\n')
    return expand_manifest(load_manifest(tmp_path / "job.toml")).batches


def alone_png(batch, t: int) -> bytes:
    """The PNG bytes of one frame of `batch` rendered on its own (no batch, nothing ahead or behind),
    read back synchronously."""
    r = renderer()
    r.reset_effects()
    model = load_model(batch.model)
    with synchronous_read_back():
        frame = Renderer.render(r, model, batch.frame_spec(batch.sequence, t))
    r.forget(model)
    return png_bytes(frame.rgba, frame.trace)


def test_a_batch_rendered_ahead_and_kept_behind_stores_the_bytes_of_frames_rendered_alone(samples, tmp_path,
                                                                                          monkeypatch):
    batches = batch_job(tmp_path, samples)
    keepers, real_keep = set(), execute.FRAMES.keep

    def keep(*a, **k):
        keepers.add(threading.current_thread() is threading.main_thread())
        return real_keep(*a, **k)

    monkeypatch.setattr(execute.FRAMES, "keep", keep)
    store = FolderStore(tmp_path / "store")
    renderer().reset_effects()
    checked = 0
    for b in batches:
        result = render_batch(b, renderer, store, "j")
        assert [f.status for f in result.frames] == ["done"] * len(b.times), [f.error for f in result.frames]
        for f in result.frames:
            assert store.read_image(f.digest) == alone_png(b, f.time_ms), f"{b.model_rel} at {f.time_ms} ms"
            checked += 1
    assert keepers == {False}  # every frame was kept in the background thread
    assert checked >= 3 * 8 and len({b.model for b in batches}) >= 3
    assert len(renderer()._frames) <= MAX_IN_FLIGHT


class Failing:
    """The real renderer, rendering ahead, with one frame broken: a GL error while drawing it, or pixels
    the PNG encoder refuses (an error in the keep behind the render thread)."""

    def __init__(self, how: str, bad_ms: int, ahead: bool):
        self.how, self.bad_ms, self.ahead = how, bad_ms, ahead

    def render(self, model, spec, model_digest=None, then=None, context=None):
        frame = renderer().render(model, spec, model_digest, then=then if self.ahead else None, context=context)
        if self.how == "encode" and spec.time_ms == self.bad_ms:
            frame.rgba = frame.rgba[..., :2]
        return frame

    def forget(self, model):
        renderer().forget(model)


@pytest.mark.parametrize("how", ["gl", "encode"])
def test_a_frame_that_fails_in_a_batch_fails_alone_with_the_words_it_has_alone(samples, tmp_path, monkeypatch,
                                                                               how):
    import renderer.scene as scene
    from renderer.gl.calls import fast

    bad_ms, real_draw = 150, scene.draw_model

    def draw_model(gpu, pose, draw):
        out = real_draw(gpu, pose, draw)
        if how == "gl" and draw.spec.time_ms == bad_ms:
            fast().glEnable(0x1)  # GL_INVALID_ENUM, pending until the frame's next check (its read-back's)
        return out

    monkeypatch.setattr(scene, "draw_model", draw_model)
    batch = next(b for b in batch_job(tmp_path, samples, size=64) if b.model_rel == "models/crate.mdx")
    results = {}
    for ahead in (False, True):
        renderer().reset_effects()
        store = FolderStore(tmp_path / f"store-{ahead}")
        results[ahead] = [(f.time_ms, f.status, f.digest, f.error)
                          for f in render_batch(batch, lambda a=ahead: Failing(how, bad_ms, a), store, "j").frames]
    assert results[True] == results[False]
    failed = [r for r in results[True] if r[1] != "done"]
    assert [r[0] for r in failed] == [bad_ms]
    words = "GL error after reading back the 64x64 frame: GL_INVALID_ENUM" if how == "gl" else \
        "encode_png takes an RGBA or RGB image, not an array of shape (64, 64, 2)"
    assert failed[0][3].startswith(f"models/crate.mdx at {bad_ms} ms: ") and words in failed[0][3]
    for t, _, digest, _ in (r for r in results[True] if r[1] == "done"):
        assert FolderStore(tmp_path / "store-True").read_image(digest) == alone_png(batch, t)


def test_frames_waiting_behind_the_render_thread_are_bounded_and_kept_in_order():
    running, seen, peak = threading.Lock(), [], [0]

    def keep(i):
        with running:  # one keep at a time
            time.sleep(0.002)
            if i == 3:
                raise ValueError("frame 3 cannot be encoded")
            seen.append(i)
            return i * 10

    behind, out = Behind(2), []
    for i in range(8):
        behind.put(i, keep, i)
        peak[0] = max(peak[0], len(behind))
        while (due := behind.due()) is not None:
            try:
                out.append((due.tag, due.result))
            except ValueError as e:
                out.append((due.tag, str(e)))
            behind.pop()
            assert len(behind) <= 2
    out += [(d.tag, d.result) for d in iter(lambda: behind.due(True), None) if behind.pop() is None]
    behind.close()
    assert peak[0] == 3 and seen == [0, 1, 2, 4, 5, 6, 7]
    assert out == [(0, 0), (1, 10), (2, 20), (3, "frame 3 cannot be encoded"), (4, 40), (5, 50), (6, 60), (7, 70)]
    now = Behind(0)  # depth 0: each call at once, in the caller's thread
    now.put("x", threading.current_thread)
    assert now.due().result is threading.current_thread() and len(now) == 1


def test_a_renderer_keeps_two_framebuffers_in_flight_whatever_the_batch(samples):
    model = load_model(samples / "crate.mdx")
    r = renderer()
    batch = [FrameSpec(time_ms=t, width=40, height=40) for t in range(0, 2000, 90)]
    for i, s in enumerate(batch):
        r.render(model, s, then=batch[i + 1] if i + 1 < len(batch) else None)
        assert len(r._frames) <= MAX_IN_FLIGHT
    r.render(model, batch[0], then=batch[1])  # then a frame of another size: the idle ones go
    r.render(model, FrameSpec(width=24, height=24))
    assert len(r._frames) <= MAX_IN_FLIGHT and not any(fb.reading for _, fb in r._frames._fbs)
    r.forget(model)


def test_a_frame_that_fails_to_read_back_fails_alone_and_keeps_the_next_one_in_flight(samples, monkeypatch):
    model = load_model(samples / "crate.mdx")
    r = renderer()
    batch = [FrameSpec(time_ms=t, width=40, height=40, background="#203040") for t in (0, 300, 600, 900)]
    expected = alone(model, batch)
    real_finish, calls, prepared = Framebuffer.finish_read, [0], []

    def finish_read(fb):
        calls[0] += 1
        if calls[0] == 2:  # the second frame's read-back
            fb.cancel_read()
            raise RuntimeError("the copy out of the pixel buffer failed")
        return real_finish(fb)

    real_prepare = Renderer._prepare

    def prepare(self, model, spec, model_digest):
        prepared.append(spec.time_ms)
        return real_prepare(self, model, spec, model_digest)

    monkeypatch.setattr(Framebuffer, "finish_read", finish_read)
    monkeypatch.setattr(Renderer, "_prepare", prepare)
    r.reset_effects()
    got = []
    for i, s in enumerate(batch):
        try:
            got.append(digest(r.render(model, s, then=batch[i + 1] if i + 1 < len(batch) else None)))
        except RuntimeError as e:
            got.append(str(e))
    assert got == [expected[0], "the copy out of the pixel buffer failed", expected[2], expected[3]]
    assert prepared == [0, 300, 600, 900]  # the frame after the failed one was not prepared again
    assert len(r._frames) <= MAX_IN_FLIGHT
    r.forget(model)
