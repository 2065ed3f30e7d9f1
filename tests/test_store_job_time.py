"""`latest` asks the store when each job's document was last written (Store.job_time: a file's
mtime, an object's LastModified) instead of reaching into the folder layout (issue 25)."""

from __future__ import annotations

import os

from farm.cli.common import job_ref
from farm.store import open_store


def test_latest_is_the_job_written_last_through_the_store_protocol(tmp_path):
    store = open_store(str(tmp_path / "store"))
    assert store.job_time("a") is None  # no such job
    store.write_job("a", {"format": 1, "id": "a", "created": "2026-01-02T00:00:00Z"})
    store.write_job("b", {"format": 1, "id": "b", "created": "2026-01-01T00:00:00Z"})
    os.utime(store.job_location("a"), (1_000_000, 1_000_000))
    os.utime(store.job_location("b"), (2_000_000, 2_000_000))
    assert store.job_time("a") == 1_000_000 and store.job_time("b") == 2_000_000
    assert job_ref("latest", str(tmp_path / "store")) == "b"
    os.utime(store.job_location("a"), (3_000_000, 3_000_000))
    assert job_ref("latest", str(tmp_path / "store")) == "a"
