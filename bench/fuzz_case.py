"""One fuzz case: which corpus file, which mutation, and what is done with the result.

Case `i` of seed `s` draws everything from `random.Random(f"{s}/{i}")`: the file (uniform over the
sorted corpus list), the mutation (`fuzz_mutate.mutate` on the bytes, or for a share of MDX / MDL
cases `fuzz_semantic.mutate_model` on the loaded model, written back) and the timestamps. `run_case` then loads
the mutated bytes with the format's own reader and, for models, builds an Animator, poses the first
and last sequence (and no sequence) at 0, a random time, 1 hour, 10^12 ms and `MAX_TIME_MS`, and
renders 32x32 frames at a random and a huge timestamp (particles and ribbons included) through
`renderer.frame.Renderer`; textures are decoded with their mip chains, Halo bitmaps decoded.
Outcome: "ok", or the exception (`FormatError` is the expected refusal of bad input; anything else
is a bug).
"""

from __future__ import annotations

import copy
import random
import struct
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
if str(Path(__file__).resolve().parent) not in sys.path:
    sys.path.append(str(Path(__file__).resolve().parent))

from fuzz_mutate import KINDS, mutate  # noqa: E402
from fuzz_semantic import mutate_model  # noqa: E402

CORPUS = Path(__file__).resolve().parents[2] / "shared" / "corpus"
SIZE = 32
BIG_MODEL_NODES = 10_000


def corpus_files(root: Path = CORPUS) -> list[Path]:
    """Every corpus file the harness knows how to read, sorted (the case plan depends on the order)."""
    return sorted(p for p in root.rglob("*") if p.is_file() and p.suffix.lower() in KINDS)


SEMANTIC_SHARE = 0.35  # MDX / MDL cases whose mutation is model-level (`fuzz_semantic`)
_ORIGINALS: dict[Path, object] = {}


def _semantic(path: Path, rng: random.Random) -> bytes | None:
    """The file loaded, edited as a Model and written back in its format; None if that is impossible."""
    from renderer.errors import FormatError

    if path not in _ORIGINALS:
        try:
            _ORIGINALS[path] = load(path, path.read_bytes()).model
        except FormatError:
            _ORIGINALS[path] = None
    if _ORIGINALS[path] is None:
        return None
    model = mutate_model(copy.deepcopy(_ORIGINALS[path]), rng)
    try:
        if path.suffix.lower() == ".mdx":
            from renderer.formats.mdx import write_mdx

            return write_mdx(model)
        from renderer.formats.mdl.write import write_mdl

        return write_mdl(model).encode("utf-8", "surrogateescape")
    except (FormatError, ValueError, OverflowError, TypeError, struct.error):  # a value the format cannot hold
        return None


def plan(seed: int, index: int, files: list[Path]) -> tuple[Path, bytes, random.Random]:
    """(corpus file, mutated bytes, the case's generator for what follows) of case `index`."""
    rng = random.Random(f"{seed}/{index}")
    path = files[rng.randrange(len(files))]
    if path.suffix.lower() in (".mdx", ".mdl") and rng.random() < SEMANTIC_SHARE:
        data = _semantic(path, random.Random(rng.random()))
        if data is not None:
            return path, data, rng
    return path, mutate(path.read_bytes(), path.suffix.lower(), rng), rng


def _tag_root(path: Path) -> Path | None:
    for parent in path.parents:
        if parent.name == "tags":
            return parent
    return None


def load(path: Path, data: bytes):
    """The Model a mutated model file loads as, with its context (renderer.context.Loaded: a Halo
    model's bitmaps are in it); FormatError when it does not load."""
    from renderer.context import Loaded, ModelContext

    suffix = path.suffix.lower()
    if suffix == ".mdx":
        from renderer.formats.mdx import read_mdx

        return Loaded(read_mdx(data, str(path)), ModelContext.from_path(str(path)))
    if suffix == ".mdl":
        from renderer.formats.mdl.read import read_mdl

        text = data.decode("utf-8", "surrogateescape").removeprefix("\ufeff")
        return Loaded(read_mdl(text, str(path)), ModelContext.from_path(str(path)))
    from renderer.formats.halo.load import load_halo_model

    model, bitmaps = load_halo_model(data, str(path), tag_root=_tag_root(path))
    return Loaded(model, ModelContext(ModelContext.from_path(str(path)).location, texture_source=bitmaps))


def exercise_model(loaded, rng: random.Random, renderer) -> None:
    from renderer.anim import Animator
    from renderer.anim.tracks import MAX_TIME_MS
    from renderer.frame import FrameSpec

    model, context = loaded
    animator = Animator(model)
    n = len(model.sequences)
    times = [0, rng.randrange(10_000), 3_600_000, 10**12, MAX_TIME_MS]
    # A pose is linear in the nodes: a model with a 100k-node chain gets 3 poses, not 15, to stay in time.
    big = len(model.nodes()) > BIG_MODEL_NODES
    for seq in sorted({0, n - 1} if n else {None}) + ([None] if n else []):
        for t in times[::2] if big else times:
            animator.pose(seq, t)
        if big:
            break
    if renderer is None:
        return
    digest = f"fuzz-{rng.randrange(1 << 62):x}"
    try:
        for t in (rng.randrange(10_000), rng.choice(times[2:])):
            seq = rng.randrange(n) if n else None
            renderer.render(model, FrameSpec(sequence=seq, time_ms=t, width=SIZE, height=SIZE), digest,
                            context=context)
    finally:
        renderer.forget(model)


def run_case(path: Path, data: bytes, rng: random.Random, renderer) -> None:
    """Load / pose / render (models) or decode (textures, bitmaps) one mutated file; raises what they raise."""
    kind = KINDS[path.suffix.lower()][0]
    if kind == "texture":
        from renderer.formats.textures import decode_texture_chain

        decode_texture_chain(data, path.name)  # level 0 and every stored mip level, as the renderer uploads
    elif kind == "bitmap":
        from renderer.formats.halo.bitmap import decode_entry, read_bitmap_tag

        tag = read_bitmap_tag(data, path.name)
        for entry in tag.entries[:4]:
            decode_entry(data, tag, entry)
    else:
        exercise_model(load(path, data), rng, renderer)
