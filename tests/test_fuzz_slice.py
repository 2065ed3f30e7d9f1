"""A bounded, seeded slice of the fuzz harness (bench/fuzz.py) in the default run: mutated corpus
files of every format go through load, pose and a 32x32 render in a capped worker process, and
nothing but FormatError comes out: no other exception, no hang, no cap hit, no crash."""

from __future__ import annotations

import sys

import pytest
from conftest import ROOT

sys.path.append(str(ROOT / "bench"))  # last: bench/farm.py must not shadow the farm package

import fuzz  # noqa: E402
from fuzz_case import corpus_files, plan  # noqa: E402


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
