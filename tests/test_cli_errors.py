"""Issue 23, item 8: what a user can get wrong is one sentence on stderr and a non-zero exit, never a
traceback. Each case runs the real `farm` command in a subprocess, as the audit did: bad FARM_*
integers, bad or unreachable broker URLs, `farm serve --port 99999`, a job document that is `[]`, a
malformed batch result, `farm status` on a read-only store, thumbnails on a full disk (tmpfs)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from golden_runs import key, make_run

from renderer.samples import write_samples

ROOT = Path(__file__).resolve().parents[1]
MANIFEST = 'name = "t"\nsize = "32x32"\ntimestamps = [0]\n[[models]]\npaths = ["models/*.mdx"]\n'
K1, K2 = key(t=0), key(t=500)


def farm(*args, cwd: Path, **env) -> subprocess.CompletedProcess:
    full = {k: v for k, v in os.environ.items() if not k.startswith("FARM_")}
    full.update({"PYTHONPATH": str(ROOT), "FARM_RENDERER": "synthetic", "FARM_USER": "t", **env})
    return subprocess.run([sys.executable, "-m", "farm.cli", *map(str, args)], cwd=cwd, env=full,
                          capture_output=True, text=True, timeout=120)


def one_sentence(r: subprocess.CompletedProcess, *words: str) -> str:
    """The run failed with one line on stderr (no traceback) that holds every one of `words`."""
    assert r.returncode == 2, (r.returncode, r.stderr)
    lines = [ln for ln in r.stderr.splitlines() if ln.strip() and not ln.startswith("usage:")
             and not ln.startswith("  ")]
    assert "Traceback" not in r.stderr and len(lines) == 1, r.stderr
    for w in words:
        assert w.lower() in lines[0].lower(), (w, lines[0])
    return lines[0]


@pytest.fixture
def project(tmp_path) -> Path:
    write_samples(tmp_path / "models")
    (tmp_path / "job.toml").write_text(MANIFEST)
    return tmp_path


@pytest.mark.parametrize("name", ["FARM_MAX_FRAMES", "FARM_FRAME_TIME_LIMIT", "FARM_BATCH_FRAMES",
                                  "FARM_PROGRESS_EVERY"])
def test_a_bad_farm_integer_is_one_sentence_naming_it(project, name):
    r = farm("run", "job.toml", "--out", "out", "--workers", "1", cwd=project, **{name: "abc"})
    one_sentence(r, name, "'abc'", "integer")


@pytest.mark.parametrize(("url", "words"), [
    ("redis://127.0.0.1:1/0", ["cannot reach", "redis://127.0.0.1:1/0", "refused"]),
    ("foo://bar", ["--broker", "foo://bar", "redis://HOST:PORT/DB"]),
    ("redis://127.0.0.1:abc/0", ["--broker", "redis://127.0.0.1:abc/0", "port", "'abc'"]),
    ("redis://:hunter2@127.0.0.1:1/0", ["cannot reach", "redis://:***@127.0.0.1:1/0"]),
])
def test_a_bad_or_unreachable_broker_is_one_sentence_naming_the_url(project, url, words):
    r = farm("run", "job.toml", "--out", "out", "--broker", url, cwd=project)
    line = one_sentence(r, *words)
    assert "hunter2" not in line


def test_a_bad_broker_in_the_environment_names_the_variable(project):
    r = farm("run", "job.toml", "--out", "out", cwd=project, FARM_BROKER_URL="redis://host:65536/0")
    one_sentence(r, "FARM_BROKER_URL", "65536", "port")


@pytest.mark.parametrize("port", ["99999", "-1", "abc"])
def test_serve_port_out_of_range_is_a_usage_error(tmp_path, port):
    make_run(tmp_path / "store", {K1: None}, job_id="j")
    r = farm("serve", "j", "--out", tmp_path / "store", "--goldens", tmp_path / "g", f"--port={port}", cwd=tmp_path)
    one_sentence(r, "--port", port, "0 to 65535")


def test_a_job_document_that_is_not_an_object_names_the_file(tmp_path):
    jobs = tmp_path / "store" / "jobs"
    jobs.mkdir(parents=True)
    (jobs / "bad.json").write_text("[]")
    r = farm("status", "bad", "--out", tmp_path / "store", cwd=tmp_path)
    one_sentence(r, str(jobs / "bad.json"), "JSON object", "array")


@pytest.mark.parametrize(("doc", "words"), [
    ('{"batch": 1, "frames": [{"key": 3}]}', ["'batch'", "string"]),
    ('{"batch": "b0", "frames": [{"key": 3}]}', ["frames[0]", "'key'", "string"]),
    ('{"batch": "b0"', ["not valid JSON"]),
])
def test_a_malformed_batch_result_names_the_file(tmp_path, doc, words):
    job = make_run(tmp_path / "store", {K1: None, K2: None}, job_id="j")  # pending, in batch b0
    path = job.store.batch_result_path("j", "b0")
    path.parent.mkdir(parents=True)
    path.write_text(doc)
    r = farm("status", "j", "--out", tmp_path / "store", cwd=tmp_path)
    one_sentence(r, str(path), *words)


def _mount_tmpfs(where: Path, size: str) -> None:
    where.mkdir(parents=True, exist_ok=True)
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(where)], capture_output=True)
    if r.returncode:
        pytest.skip(f"cannot mount a tmpfs here: {r.stderr.decode().strip()}")


def _umount(where: Path) -> None:
    subprocess.run(["umount", "-l", str(where)], check=False)


def test_status_answers_on_a_read_only_store(tmp_path):
    """Workers wrote a batch result the job document does not hold yet: status shows it merged and
    does not need to write it (it tries, and says in one line that it could not)."""
    mnt = tmp_path / "ro"
    _mount_tmpfs(mnt, "4m")
    try:
        job = make_run(mnt / "store", {K1: None, K2: None}, job_id="j")
        frames = [{"key": K1, "time_ms": 0, "status": "failed", "digest": None, "error": "boom"}]
        path = job.store.batch_result_path("j", "b0")
        path.parent.mkdir(parents=True)
        path.write_text(json.dumps({"batch": "b0", "frames": frames}))
        before = {p: p.read_bytes() for p in (mnt / "store").rglob("*") if p.is_file()}
        subprocess.run(["mount", "-o", "remount,ro", str(mnt)], check=True)
        r = farm("status", "j", "--out", mnt / "store", "--json", cwd=tmp_path)
        assert r.returncode == 1 and "Traceback" not in r.stderr, r.stderr  # 1: a frame failed, one pending
        said = r.stderr.strip().splitlines()  # the one line saying the merge is shown, not saved
        assert len(said) == 1 and said[0].startswith("farm status: the results merged from the workers are shown,"
                                                     " not saved in the store ("), r.stderr
        out = json.loads(r.stdout)
        assert (out["failed"], out["pending"], out["failed_traces"]) == (1, 1, {K1: "boom"})
        assert {p: p.read_bytes() for p in (mnt / "store").rglob("*") if p.is_file()} == before
    finally:
        _umount(mnt)


def test_thumbnails_on_a_full_disk_is_one_sentence_naming_the_path(project):
    full = project / "full"
    _mount_tmpfs(full, "16k")
    try:
        r = farm("thumbnails", "models", "-o", full / "t", "--workers", "1", "--no-progress", cwd=project)
        line = one_sentence(r, str(full / "t"), "no space")
        assert line.startswith("error: ")
    finally:
        _umount(full)
    shutil.rmtree(full, ignore_errors=True)


def test_every_integer_variable_is_listed_and_checked_before_a_command_starts(tmp_path):
    from farm.environment import FARM_VARIABLES, INT_BOUNDS, check_environment
    from farm.settings import SettingError

    assert set(INT_BOUNDS) <= {n for n, _, _ in FARM_VARIABLES}
    with pytest.raises(SettingError, match="FARM_NIGHTLY_MINUTE must be from 0 to 59, not 60"):
        check_environment({"FARM_NIGHTLY_MINUTE": "60"})
    r = farm("goldens", "--goldens", tmp_path / "g", cwd=tmp_path, FARM_MAX_DELIVERIES="0")
    one_sentence(r, "FARM_MAX_DELIVERIES", "from 1 to 1000", "0")
