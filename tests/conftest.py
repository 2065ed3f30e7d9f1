"""Shared test helpers: where the corpus lives and which corpus files are which."""

from __future__ import annotations

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
CORPUS = ROOT.parent / "shared" / "corpus"


def corpus_files(*patterns: str) -> list[Path]:
    out: set[Path] = set()
    for pat in patterns:
        out.update(CORPUS.rglob(pat))
    return sorted(out)


def corpus_path(rel: str) -> Path:
    p = CORPUS / rel
    if not p.exists():
        pytest.skip(f"corpus file {rel} is not present")
    return p


@pytest.fixture
def corpus():
    if not CORPUS.is_dir():
        pytest.skip("../shared/corpus is not present")
    return CORPUS
