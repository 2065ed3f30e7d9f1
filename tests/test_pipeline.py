"""Rendering ahead (`Renderer.render(..., then=next_spec)`, issue 37): the next frame is posed while this
one rasterises and issued once it is read back. Every frame must be the bytes of the same frame
rendered alone, one at a time; errors belong to the frame that has them."""

from __future__ import annotations

import hashlib
import json

import pytest
from conftest import corpus_files
from render_util import renderer

from farm.plan.batches import expand_manifest
from farm.plan.manifest import load_manifest
from farm.run.execute import render_batch
from farm.store import FolderStore
from renderer.formats import load_model
from renderer.frame import FrameSpec, Renderer
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


def alone(model, batch: list[FrameSpec]) -> list[str]:
    r = renderer()
    r.reset_effects()
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
