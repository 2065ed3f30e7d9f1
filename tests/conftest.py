"""Shared test helpers: where the corpus lives and which corpus files are which."""

from __future__ import annotations

import os
import socket
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
CORPUS = ROOT.parent / "shared" / "corpus"
# The tests' shared Redis: one setting, the same variable scripts/ensure-redis.sh reads (make test starts
# a throwaway server there when none answers). Tests that need a Redis of their own start one on a free port.
REDIS_HOST = "127.0.0.1"
REDIS_PORT = int(os.environ.get("MODELFARM_REDIS_PORT") or 6379)


def redis_url(db: int) -> str:
    """The URL of database `db` on the tests' shared Redis."""
    return f"redis://{REDIS_HOST}:{REDIS_PORT}/{db}"


def redis_up(port: int = REDIS_PORT) -> bool:
    try:
        with socket.create_connection((REDIS_HOST, port), timeout=1) as s:
            s.sendall(b"PING\r\n")
            return s.recv(16).startswith(b"+PONG")
    except OSError:
        return False


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
