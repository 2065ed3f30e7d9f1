"""Jobs into batches, trace keys, the batch runner (with the no-GL stand-in), the store, progress."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from farm.plan.batches import Batch, expand_manifest, expand_plan, resolve_times
from farm.plan.keys import trace_key_for
from farm.plan.manifest import ManifestError, load_manifest
from farm.run.execute import BatchResult, TransientError, render_batch
from farm.run.progress import Progress
from farm.run.worker import SyntheticRenderer
from farm.settings import RenderSettings
from farm.store import FolderStore as Store
from renderer.samples import write_samples

# A chunk that claims more bytes than the file has: the loader refuses it with a FormatError.
BROKEN_MDX = b"MDLXVERS\x04\x00\x00\x00\x20\x03\x00\x00GEOS\xe8\x03\x00\x00" + bytes(8)


@pytest.fixture(scope="module")
def samples(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("samples")
    write_samples(root / "models")
    (root / "models" / "broken.mdx").write_bytes(BROKEN_MDX)
    return root


def manifest(root: Path, text: str, name: str = "job.toml"):
    (root / name).write_text(text)
    return load_manifest(root / name)


def sequences(path: Path) -> list[tuple[str, int]]:
    from renderer.formats import load_model

    return [(s.name, s.interval[1] - s.interval[0]) for s in load_model(path).sequences]


def test_trace_key_is_stable_and_escaped():
    assert trace_key_for("m/a.mdx", "Stand", 500, RenderSettings(64, 32, 4, "#102030", team=2)) == \
        "m/a.mdx|Stand|500ms|auto|64x32|msaa4|team2|#102030"
    assert trace_key_for("a|b%.mdx", None, 0, RenderSettings(1, 1, missing_textures="white")) == \
        "a%7Cb%25.mdx|-|0ms|auto|1x1|msaa0|team0|transparent|white"


def test_resolve_times():
    from farm.plan.manifest import ModelPlan

    p = ModelPlan(path="x", rel="x", timestamps=(1000, "0%", "50%", "100%", "33.3%"))
    assert resolve_times(p, 2000) == [0, 666, 1000, 2000]
    p = ModelPlan(path="x", rel="x", timestamps=None, every=300)
    assert resolve_times(p, 1000) == [0, 300, 600, 900]
    assert resolve_times(p, 0) == [0]


def test_expansion_one_batch_per_model_and_sequence(samples):
    m = manifest(samples, """
        size = "64x64"
        timestamps = ["100%", 250, "0%"]
        [thresholds]
        ssim = 0.97
        [[thresholds.traces]]
        match = "models/crate.mdx|Death|*"
        ssim = 0.9
        [[models]]
        paths = ["models/*.mdx"]
        [[models]]
        path = "models/effects.mdx"
        sequences = ["stand"]
        every = 1000
        """.replace("\n        ", "\n"))
    plan = expand_manifest(m)
    crate = sequences(samples / "models" / "crate.mdx")
    by_model: dict[str, list[Batch]] = {}
    for b in plan.batches:
        by_model.setdefault(b.model_rel, []).append(b)
        assert b.times == sorted(b.times) and len(set(b.keys)) == len(b.keys) == len(b.times)
    # crate: every sequence, times from the fractions of each sequence's length
    assert [b.sequence_name for b in by_model["models/crate.mdx"]] == [n for n, _ in crate]
    for b, (_, length) in zip(by_model["models/crate.mdx"], crate, strict=True):
        assert b.times == sorted([0, 250, length]) and not b.provisional and b.model_digest
        # the fractions are named as such in the keys (the same trace whatever the length), in order of ms
        assert [k.split("|")[2] for k in b.keys] == (["0%", "250ms", "100%"] if length >= 250 else
                                                     ["0%", "100%", "250ms"])
    # effects: the later entry; "stand" found case-insensitively (an unknown name: tests/test_plan_errors.py)
    eff = by_model["models/effects.mdx"]
    assert [(b.sequence_name, b.provisional) for b in eff] == [("Stand", False)]
    # the broken model could not be read: one provisional batch, keys still named, failed as planned
    (broken,) = by_model["models/broken.mdx"]
    assert broken.provisional and broken.model_digest is None and broken.sequence is None
    assert set(plan.unloadable) == {"models/broken.mdx"} and broken not in plan.runnable()
    # (no sequence to take fractions of: "0%" and "100%" are one frame at 0 ms, keyed in ms as before)
    assert broken.keys == [f"models/broken.mdx|-|{t}ms|auto|64x64|msaa0|team0|transparent" for t in (0, 250)]
    # thresholds per trace: the job's, then the matching [[thresholds.traces]]
    key = next(k for k in plan.traces if k.startswith("models/crate.mdx|Death|"))
    assert plan.traces[key]["thresholds"] == {"min_ssim": 0.9}
    assert plan.traces[by_model["models/crate.mdx"][0].keys[0]]["thresholds"] == {"min_ssim": 0.97}
    assert len(plan.traces) == sum(len(b.keys) for b in plan.batches)  # every key once
    # batch ids are a function of the batch, and JSON round trips keep them
    again = expand_manifest(m)
    assert [b.id for b in again.batches] == [b.id for b in plan.batches]
    assert all(Batch.from_dict(json.loads(json.dumps(b.to_dict()))) == b for b in plan.batches)


def test_trace_threshold_glob_that_matches_nothing(samples):
    m = manifest(samples, '[[thresholds.traces]]\nmatch = "x*"\nssim = 0.5\n[[models]]\npath = "models/crate.mdx"\n')
    with pytest.raises(ManifestError) as e:
        expand_manifest(m)
    assert e.value.line == 1 and "matches no trace" in str(e.value)


class Recorder(SyntheticRenderer):
    """The stand-in renderer, counting renders; raises for one chosen time."""

    def __init__(self, fail_at=None, exc=RuntimeError):
        super().__init__()
        self.rendered, self.forgotten, self.fail_at, self.exc = [], 0, fail_at, exc

    def render(self, model, spec, model_digest=None):
        if spec.time_ms == self.fail_at:
            raise self.exc(f"boom at {spec.time_ms}")
        self.rendered.append(spec.time_ms)
        return super().render(model, spec, model_digest)

    def forget(self, model):
        self.forgotten += 1


def crate_batch(samples, times=(0, 500, 1000), **kw) -> Batch:
    m = manifest(samples, f'size = "16x16"\nsequences = ["Stand"]\ntimestamps = {list(times)}\n'
                          '[[models]]\npath = "models/crate.mdx"\n', "crate.toml")
    (b,) = expand_manifest(m).batches
    return b


def test_render_batch_writes_store_and_result(samples, tmp_path):
    store, r = Store(tmp_path / "out"), Recorder()
    b = crate_batch(samples, times=(1000, 0, 500))
    seen = []
    result = render_batch(b, lambda: r, store, "job1", on_frame=lambda *a: seen.append(a))
    assert r.rendered == [0, 500, 1000] and r.forgotten == 1  # ascending, model freed at the end
    assert [f.status for f in result.frames] == ["done"] * 3
    assert seen[-1] == (3, 3, 0)
    for f in result.frames:
        png = store.read_image(f.digest)
        side = store.frame_sidecar("job1", b.id, f.key, f.digest)  # in the batch result, not an object of its own
        assert side["trace"]["time_ms"] == f.time_ms and side["digest"] == f.digest and side["bytes"] == len(png)
        assert side["trace"]["gl"]["renderer"] == "synthetic" and side["diagnostics"] == [] and side["blank"] is None
        assert not store.sidecar_path(f.digest).exists()
        from renderer.png import read_png

        assert read_png(store.image_path(f.digest))[1]["time_ms"] == f.time_ms
    assert store.read_batch_result("job1", b.id) == result.to_dict()
    # a redelivery writes the same files and the same result, and counts a second delivery
    files = {p: p.read_bytes() for p in (tmp_path / "out" / "images").rglob("*") if p.is_file()}
    again = render_batch(b, lambda: Recorder(), store, "job1")
    assert again.to_dict() == result.to_dict() and again.attempt == 2
    assert {p: p.read_bytes() for p in (tmp_path / "out" / "images").rglob("*") if p.is_file()} == files
    assert not list((tmp_path / "out" / "tmp").iterdir())


def test_frame_failure_fails_only_that_frame(samples, tmp_path):
    result = render_batch(crate_batch(samples), lambda: Recorder(fail_at=500), Store(tmp_path), "j")
    assert [f.status for f in result.frames] == ["done", "failed", "done"]
    assert "boom at 500" in result.frames[1].error and "models/crate.mdx at 500 ms" in result.frames[1].error


def test_load_failure_fails_the_batch_with_the_sentence(samples, tmp_path):
    m = manifest(samples, 'timestamps = [0, 10]\n[[models]]\npath = "models/broken.mdx"\n', "b.toml")
    (b,) = expand_manifest(m).batches
    r = Recorder()
    result = render_batch(b, lambda: r, Store(tmp_path), "j")
    from renderer.errors import FormatError
    from renderer.formats import load_model

    with pytest.raises(FormatError) as e:
        load_model(samples / "models" / "broken.mdx")
    assert [f.error for f in result.frames] == [e.value.sentence()] * 2 and r.rendered == []


def test_unknown_sequence_and_changed_model(samples, tmp_path):
    m = manifest(samples, 'sequences = ["Nope"]\n[[models]]\npath = "models/crate.mdx"\n', "n.toml")
    with pytest.raises(ManifestError, match="has no 'Nope'"):
        expand_manifest(m)
    (b,) = expand_plan(m.plans[0]).batches  # as `farm retry` plans a model of an older job again
    (f,) = render_batch(b, Recorder, Store(tmp_path), "j").frames
    assert "unknown sequence 'Nope'" in f.error and "'Stand'" in f.error
    b = crate_batch(samples)
    b.model_digest = "0" * 64
    result = render_batch(b, Recorder, Store(tmp_path), "j")
    assert all("changed since the job was planned" in f.error for f in result.frames)


def test_no_renderer_and_store_errors_are_transient(samples, tmp_path):
    def broken_factory():
        raise RuntimeError("no EGL display")

    with pytest.raises(TransientError, match="no EGL display"):
        render_batch(crate_batch(samples), broken_factory, Store(tmp_path / "a"), "j")

    class ReadOnly(Store):
        def put_image(self, png, meta=None):
            raise PermissionError("read-only file system")

    with pytest.raises(TransientError, match="read-only"):
        render_batch(crate_batch(samples), Recorder, ReadOnly(tmp_path / "b"), "j")


def test_abort_fails_the_rest_and_deliveries_are_bounded(samples, tmp_path):
    class Stop(Exception):
        pass

    b = crate_batch(samples)
    result = render_batch(b, lambda: Recorder(fail_at=500, exc=Stop), Store(tmp_path), "j", abort=(Stop,))
    assert [f.status for f in result.frames] == ["done", "failed", "failed"]
    assert "time limit" in result.frames[2].error
    store = Store(tmp_path / "loop")
    for _ in range(3):
        store.begin_batch("j", b.id)  # three deliveries that died
    r = Recorder()
    result = render_batch(b, lambda: r, store, "j", max_deliveries=3)
    assert r.rendered == [] and all("died 3 times" in f.error for f in result.frames)
    store.reset_batch("j", b.id)
    assert render_batch(b, Recorder, store, "j").failed == 0


def test_batch_subset_and_result_roundtrip(samples):
    b = crate_batch(samples)
    s = b.subset([b.keys[2], b.keys[0]])
    assert s.times == [0, 1000] and s.id != b.id and s.model == b.model
    r = BatchResult.from_dict({"batch": "x", "frames": [{"key": "k", "time_ms": 0, "status": "done",
                                                         "digest": "d", "error": None}]})
    assert r.failed == 0 and r.to_dict()["frames"][0]["digest"] == "d"


def test_progress_never_goes_back():
    p = Progress(10, enabled=False)
    p.update("a", 3, 1)
    p.update("b", 2)
    assert (p.done, p.failed) == (5, 1)
    p.update("a", 0)  # redelivered: counts again from zero
    assert p.done == 2 and p._shown == 5
    p.finish("a", 4, 1)
    p.update("a", 1)  # late news from a finished batch is ignored
    assert (p.done, p.failed) == (6, 1)


def test_progress_sums_match_a_recount():
    """The running sums (kept per update) equal a recount of every batch after any sequence of updates,
    redeliveries, finishes and repeated finishes."""
    import random

    rng = random.Random(7)
    p = Progress(10**6, enabled=False)
    running: dict[str, tuple[int, int]] = {}
    finished: dict[str, tuple[int, int]] = {}
    for _ in range(3000):
        batch = f"b{rng.randrange(60)}"
        done = rng.randrange(48)
        failed = rng.randrange(done + 1)
        if rng.random() < 0.3:
            p.finish(batch, done, failed)
            running.pop(batch, None)
            finished[batch] = (done, failed)
        else:
            p.update(batch, done, failed)
            if batch not in finished:
                running[batch] = (done, failed)
        both = list(running.values()) + list(finished.values())
        assert (p.done, p.failed) == (sum(v[0] for v in both), sum(v[1] for v in both))
