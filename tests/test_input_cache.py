"""A worker's input cache (farm.run.input_cache) and the store's inputs (Store.put_input/read_input):
bounded, least recently used out, a damaged cached file fetched again, a damaged stored input an
error naming it (never read as whole); and when inputs travel (FARM_INPUTS)."""

from __future__ import annotations

import hashlib
import os

import pytest

from farm.run.input_cache import InputCache
from farm.run.inputs import travels
from farm.settings import SettingError
from farm.store import FolderStore
from farm.store.documents import StoreError


def _blob(i: int, size: int = 1000) -> tuple[str, bytes]:
    data = bytes([i % 256]) * size
    return hashlib.sha256(data).hexdigest(), data


def test_the_cache_keeps_at_most_its_limit_least_recently_used_out(tmp_path):
    blobs = dict(_blob(i) for i in range(6))
    fetched = []

    def fetch(sha):
        fetched.append(sha)
        return blobs[sha]

    cache = InputCache(tmp_path / "c", 3500)
    order = list(blobs)
    for i, sha in enumerate(order[:3]):
        assert cache.get(sha, fetch) == blobs[sha]
        os.utime(cache.path(sha), ns=(i * 10**9, i * 10**9))  # older first
    assert cache.get(order[0], fetch) == blobs[order[0]]  # a hit: now the most recently used
    assert fetched == order[:3] and cache.hits == 1
    cache.get(order[3], fetch)  # 4000 bytes > 3500: the least recently used (order[1]) goes
    kept = {p.name for p in (tmp_path / "c").glob("??/*")}
    assert kept == {order[0], order[2], order[3]}
    assert sum(p.stat().st_size for p in (tmp_path / "c").glob("??/*")) <= 3500


def test_a_damaged_cached_input_is_fetched_again(tmp_path):
    sha, data = _blob(7)
    cache = InputCache(tmp_path / "c", 10**6)
    cache.get(sha, lambda s: data)
    cache.path(sha).write_bytes(data[:10])  # cut short on the worker's disk
    assert cache.get(sha, lambda s: data) == data and cache.misses == 2
    assert cache.path(sha).read_bytes() == data


def test_an_input_larger_than_the_cache_is_used_not_kept(tmp_path):
    sha, data = _blob(9, 5000)
    cache = InputCache(tmp_path / "c", 1000)
    assert cache.get(sha, lambda s: data) == data
    assert not cache.path(sha).exists()


def test_folder_store_inputs_are_content_addressed_and_checked(tmp_path):
    store = FolderStore(tmp_path / "out")
    sha, data = _blob(3)
    assert store.put_input(data) == sha and store.put_input(data) == sha
    assert store.read_input(sha) == data
    path = tmp_path / "out" / "inputs" / sha[:2] / sha
    path.write_bytes(data[:100])  # half written by something else
    with pytest.raises(StoreError, match=f"inputs/{sha[:2]}/{sha}: the input's bytes do not have its sha256"):
        store.read_input(sha)


def test_when_inputs_travel(tmp_path, monkeypatch):
    folder = FolderStore(tmp_path / "out")

    class Bucket:
        location = "s3://bucket/prefix"

    monkeypatch.delenv("FARM_INPUTS", raising=False)
    assert (travels(folder), travels(Bucket())) == (False, True)  # auto: an object store
    assert travels(folder, "travel") and not travels(Bucket(), "shared")
    monkeypatch.setenv("FARM_INPUTS", "travel")
    assert travels(folder)
    monkeypatch.setenv("FARM_INPUTS", "sometimes")
    with pytest.raises(SettingError, match='FARM_INPUTS must be "auto" or "travel" or "shared", not \'sometimes\''):
        travels(folder)


def test_the_cache_folder_and_size_come_from_the_environment(tmp_path, monkeypatch):
    monkeypatch.setenv("FARM_INPUT_CACHE", str(tmp_path / "here"))
    monkeypatch.setenv("FARM_INPUT_CACHE_MB", "3")
    cache = InputCache.from_env()
    assert (cache.folder, cache.limit) == (tmp_path / "here", 3 * 1024 * 1024)
    monkeypatch.setenv("FARM_INPUT_CACHE_MB", "lots")
    with pytest.raises(SettingError, match="FARM_INPUT_CACHE_MB must be an integer, not 'lots'"):
        InputCache.from_env()
