"""A bounded, seeded slice of the fuzz harness (bench/fuzz.py) in the default run: mutated corpus
files of every format go through load, pose and a 32x32 render in a capped worker process, and
nothing but FormatError comes out: no other exception, no hang, no cap hit, no crash."""

from __future__ import annotations

import sys

import pytest
from conftest import ROOT

sys.path.append(str(ROOT / "bench"))

import fuzz  # noqa: E402
from fuzz_case import corpus_files, plan  # noqa: E402

pytestmark = pytest.mark.slow  # the fuzz slice: capped worker processes (make test-fast leaves them out)


@pytest.mark.corpus
@pytest.mark.gl
def test_a_seeded_fuzz_slice_raises_only_format_errors(corpus):
    summary = fuzz.run(seed=14, cases=150, jobs=1, timeout=60, mem_mb=2048)
    assert summary.cases == 150
    assert not summary.exceptions and not summary.hangs and not summary.caps and not summary.crashes, summary.table()
    assert summary.ok_kinds.get("model", 0) >= 10, summary.table()  # models really were posed and rendered


@pytest.mark.corpus
def test_cases_are_reproducible(corpus):
    files = corpus_files()
    assert {p.suffix.lower() for p in files} >= {".mdx", ".mdl", ".gbxmodel", ".blp", ".dds", ".png", ".bitmap"}
    for i in (0, 7, 149):
        a, b = plan(14, i, files), plan(14, i, files)
        assert a[0] == b[0] and a[1] == b[1] and a[2].random() == b[2].random()


@pytest.mark.corpus
def test_the_structure_aware_kinds_hit_their_fields_and_raise_only_format_errors(corpus):
    """Issue 23's mutation kinds, each applied to corpus files of its format in this process: huge
    texture header fields (decoded with their mip chains), Halo block counts, MDX chunk sizes, MDL
    nesting, and the model-level edits (a 100,000-node parent chain, negative ids, non-finite extents)
    posed by the Animator. Anything but FormatError fails the test."""
    import random

    import fuzz_mutate as fm
    import fuzz_semantic as fs
    from fuzz_case import exercise_model, load, run_case

    from renderer.errors import FormatError

    files = corpus_files()
    by_suffix: dict[str, list] = {}
    for p in files:
        by_suffix.setdefault(p.suffix.lower(), []).append(p)
    outcomes = {"ok": 0, "FormatError": 0, "unchanged": 0}
    for suffix in (".dds", ".blp", ".tga", ".png", ".model", ".gbxmodel", ".bitmap", ".mdx"):
        for path in by_suffix.get(suffix, [])[:6]:
            original = path.read_bytes()
            for seed in range(12):
                rng = random.Random(f"kinds/{path.name}/{seed}")
                data = fm._structured(original, suffix, fm.KINDS[suffix][1], rng)
                outcomes["unchanged"] += data == original  # a field that already held the value
                try:
                    run_case(path, data, rng, None)
                    outcomes["ok"] += 1
                except FormatError:
                    outcomes["FormatError"] += 1
    assert outcomes["FormatError"] >= 50 and outcomes["ok"] >= 20 and outcomes["unchanged"] < 20, outcomes
    dds = next(p for p in by_suffix[".dds"] if p.read_bytes()[84:88] == b"DXT1")
    b = bytearray(dds.read_bytes())
    for seed in range(40):  # the mip count field is among those hit
        fm._texture_fields(b, random.Random(seed))
    assert b[28:32] != dds.read_bytes()[28:32]

    mdl = by_suffix[".mdl"][0]
    nested = fm._nesting(mdl.read_bytes(), random.Random(1))
    assert nested.count(b"{") >= 1000 + mdl.read_bytes().count(b"{")
    with pytest.raises(FormatError):
        load(mdl, nested)

    mdx = next(p for p in by_suffix[".mdx"] if p.stat().st_size < 200_000)
    from renderer.formats.mdx import read_mdx, write_mdx

    model, context = load(mdx, mdx.read_bytes())
    fs.CHAIN_LENGTHS, saved = (100_000,), fs.CHAIN_LENGTHS
    try:
        fs._deep_chain(model, random.Random(2))
    finally:
        fs.CHAIN_LENGTHS = saved
    fs._negative_ids(model, random.Random(3))
    fs._extents(model, random.Random(4))
    again = read_mdx(write_mdx(model), str(mdx))
    assert len(again.helpers) >= 100_000
    exercise_model((again, context), random.Random(5), None)
