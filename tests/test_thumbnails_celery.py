"""`farm thumbnails --broker`: the same thumbnails, byte for byte, from a real `celery -A tasks worker`
on a real Redis as from the local process pool (the worker fixture is test_farm_celery's)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

os.environ.setdefault("EGL_PLATFORM", "surfaceless")
os.environ.setdefault("PYOPENGL_PLATFORM", "egl")

from test_farm_celery import BROKEN_MDX, REDIS, worker  # noqa: E402, F401 - the module-scoped worker fixture

from farm.thumbs import ThumbnailOptions, make_thumbnails  # noqa: E402
from renderer.samples import write_samples  # noqa: E402

pytestmark = pytest.mark.slow  # real Celery workers (make test-fast leaves them out)


def test_celery_and_local_thumbnails_are_identical(worker, tmp_path):  # noqa: F811
    root = tmp_path / "models"
    write_samples(root)
    (root / "broken.mdx").write_bytes(BROKEN_MDX)
    opts = ThumbnailOptions(size=64, sheet=2)
    remote = make_thumbnails([root], tmp_path / "celery", opts, broker=REDIS, progress=False)
    local = make_thumbnails([root], tmp_path / "local", opts, broker="local", workers=2, progress=False)
    assert (remote.mode, local.mode) == ("celery", "local")
    assert len(remote.rendered) == len(local.rendered) == 4
    assert list(remote.failed) == list(local.failed) == ["models/broken.mdx"]
    assert "chunk GEOS at byte 20" in remote.failed["models/broken.mdx"]
    files = sorted(p.relative_to(tmp_path / "local") for p in (tmp_path / "local").rglob("*")
                   if p.is_file() and ".farm" not in p.parts)
    assert sorted(p.relative_to(tmp_path / "celery") for p in (tmp_path / "celery").rglob("*")
                  if p.is_file() and ".farm" not in p.parts) == files
    assert Path("thumbs/models/crate.mdx.png") in files and Path("index.json") in files
    for rel in files:  # thumbnails, sheets, index.json and index.html: the same bytes
        assert (tmp_path / "celery" / rel).read_bytes() == (tmp_path / "local" / rel).read_bytes(), rel
    again = make_thumbnails([root], tmp_path / "celery", opts, broker=REDIS, progress=False)
    # an unchanged model that failed for its own reason is not tried again (issue 33 item 6) ...
    assert again.rendered == [] and again.skipped == 3 and again.kept_failed == 1
    assert list(again.failed) == ["models/broken.mdx"]
    retried = make_thumbnails([root], tmp_path / "celery", opts, broker=REDIS, progress=False, retry_failed=True)
    assert retried.rendered == ["models/broken.mdx"] and retried.skipped == 3  # ... unless asked
