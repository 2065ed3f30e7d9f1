"""Untrusted files rendered in a process that can do nothing else (issue 34 item 10): with
`farm thumbnails --untrusted` or FARM_UNTRUSTED=1, a renderer that tries to reach the network, write
outside the store, allocate past the memory cap, spin past the CPU cap or crash fails its own
model's frames with one sentence, while the others render; without it, the same renderer reaches
the network and writes the file (so the test can fail); and a real render's bytes do not change."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from farm.cli import main
from farm.run import sandbox
from renderer.samples import write_samples

ROOT = Path(__file__).resolve().parents[1]
HERE = Path(__file__).resolve().parent
ATTACKS = ("net", "write", "eat", "spin", "crash", "undo")


def _namespaces_work() -> str | None:
    probe = subprocess.run([sys.executable, "-c", "import ctypes,sys; sys.exit(ctypes.CDLL(None).unshare(0x40020000))"],
                           capture_output=True)
    return None if probe.returncode == 0 else "the kernel refuses new network and mount namespaces here (not root?)"


pytestmark = pytest.mark.skipif(_namespaces_work() is not None, reason=_namespaces_work() or "")


@pytest.fixture
def listener():
    """A socket on loopback that counts the connections it gets."""
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen()
    srv.settimeout(0.2)
    got, stop = [], threading.Event()

    def accept():
        while not stop.is_set():
            try:
                conn, _ = srv.accept()
                got.append(1)
                conn.close()
            except OSError:
                pass

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    yield srv.getsockname()[1], got
    stop.set()
    thread.join(5)
    srv.close()


@pytest.fixture
def uploads(tmp_path):
    write_samples(tmp_path / "samples")
    root = tmp_path / "uploads"
    root.mkdir()
    crate = (tmp_path / "samples" / "crate.mdx").read_bytes()
    for name in ("ok", *ATTACKS):
        (root / f"{name}.mdx").write_bytes(crate)
    return root


def thumbnails(root: Path, out: Path, port: int, secret: Path, *extra: str, **env) -> tuple[int, dict, str]:
    environ = {**os.environ, "PYTHONPATH": os.pathsep.join([str(HERE), str(ROOT)]),
               "FARM_RENDERER": "hostile_renderer:HostileRenderer", "HOSTILE_PORT": str(port),
               "HOSTILE_FILE": str(secret), "FARM_UNTRUSTED_CPU_S": "3", "FARM_UNTRUSTED_MEMORY_MB": "512", **env}
    done = subprocess.run([sys.executable, "-m", "farm.cli", "thumbnails", str(root), "-o", str(out), "--size", "16",
                           "--workers", "1", "--no-progress", "--sheet", "0", *extra], capture_output=True, text=True,
                          env=environ, timeout=300)
    models = {m["path"]: m for m in json.loads((out / "index.json").read_text())["models"]}
    return done.returncode, models, done.stdout + done.stderr


@pytest.mark.slow  # farm processes, each model in a child process
def test_untrusted_thumbnails_fail_each_attack_alone(uploads, tmp_path, listener):
    port, connections = listener
    secret = tmp_path / "outside" / "stolen.txt"
    secret.parent.mkdir()
    rc, models, printed = thumbnails(uploads, tmp_path / "out", port, secret, "--untrusted")
    assert rc == 0, printed
    assert models["ok.mdx"]["status"] == "done" and (tmp_path / "out" / "thumbs" / "uploads" / "ok.mdx.png").is_file()
    errors = {name: models[f"{name}.mdx"].get("error") or "" for name in ATTACKS}
    assert all(models[f"{name}.mdx"]["status"] == "failed" for name in ATTACKS), models
    assert "Network is unreachable" in errors["net"] and connections == []
    assert "Read-only file system" in errors["write"] and not secret.exists()
    assert "memory" in errors["eat"] and "512 MiB" in errors["eat"]
    assert "CPU time cap of 3 s" in errors["spin"]
    assert "SIGSEGV" in errors["crash"]
    assert "Read-only file system" in errors["undo"]  # root's setns and remount were refused
    assert all("\n" not in e for e in errors.values())  # one sentence each


@pytest.mark.slow  # farm processes
def test_without_untrusted_the_same_renderer_reaches_out(uploads, tmp_path, listener):
    port, connections = listener
    secret = tmp_path / "outside" / "stolen.txt"
    secret.parent.mkdir()
    for name in ("eat", "spin", "crash", "undo"):  # undo would remount this host's mounts
        (uploads / f"{name}.mdx").unlink()
    rc, models, printed = thumbnails(uploads, tmp_path / "out", port, secret)
    assert rc == 0, printed
    assert models["net.mdx"]["status"] == "done" and connections
    assert models["write.mdx"]["status"] == "done" and secret.read_text() == "written by a model\n"


def test_untrusted_refuses_a_bucket_and_a_broker(uploads, tmp_path, capsys):
    assert main(["thumbnails", str(uploads), "-o", "s3://bucket/thumbs", "--untrusted"]) == 2
    assert "the store must be a folder" in capsys.readouterr().err
    assert main(["thumbnails", str(uploads), "-o", str(tmp_path / "o"), "--untrusted",
                 "--broker", "redis://127.0.0.1:1/0"]) == 2
    assert "FARM_UNTRUSTED=1" in capsys.readouterr().err


@pytest.mark.slow  # a local pool rendering with GL, twice
def test_farm_run_untrusted_renders_the_same_bytes(tmp_path, monkeypatch, capsys):
    """FARM_UNTRUSTED=1 on `farm run` (the local pool; a Celery worker reads it the same way): the
    real renderer in the confined child draws the very PNGs it draws unconfined."""
    write_samples(tmp_path / "samples")
    manifest = tmp_path / "job.toml"
    manifest.write_text('name = "u"\nsize = "32x32"\ntimestamps = [0, 300]\n'
                        'models = ["samples/crate.mdx", "samples/effects.mdx"]\n')
    frames = {}
    for flag in ("0", "1"):
        monkeypatch.setenv("FARM_UNTRUSTED", flag)
        out = tmp_path / f"out{flag}"
        assert main(["run", str(manifest), "--out", str(out), "--workers", "1", "--no-progress"]) in (0, 1)
        frames[flag] = sorted(p.read_bytes() for p in (out / "images").rglob("*.png"))
    capsys.readouterr()
    assert frames["1"] == frames["0"] and len(frames["0"]) >= 4


def test_a_child_that_sleeps_is_killed_after_its_wall_time(monkeypatch):
    monkeypatch.setattr(sandbox, "wall_limit", lambda caps: 1.0)

    def sleeper(progress):
        import time

        time.sleep(60)
        return {}

    with pytest.raises(sandbox.SandboxError, match="more than 1 s of wall time"):
        sandbox.run_confined(sleeper, [])


def test_the_child_has_no_capabilities_and_cannot_regain_them(tmp_path):
    """A root worker's child keeps uid 0 but none of root's powers: no effective or bounding
    capabilities, no_new_privs, so remounting / writable or re-entering the host's namespaces fails."""
    def probe(progress):
        status = dict(line.split(":\t", 1) for line in Path("/proc/self/status").read_text().splitlines()
                      if ":\t" in line)
        fd = os.open("/proc/1/ns/mnt", os.O_RDONLY) if os.access("/proc/1/ns/mnt", os.R_OK) else -1
        import ctypes
        libc = ctypes.CDLL(None, use_errno=True)
        remount = libc.mount(None, b"/", None, ctypes.c_ulong(32 | 4096), None)
        return {key: status[key].strip() for key in ("CapEff", "CapPrm", "CapBnd", "CapAmb", "NoNewPrivs")} | {
            "setns": libc.setns(fd, 0x00020000) if fd >= 0 else -1, "remount": remount}

    out = sandbox.run_confined(probe, [str(tmp_path)])
    assert {out[k] for k in ("CapEff", "CapPrm", "CapBnd", "CapAmb")} == {"0000000000000000"}, out
    assert out["NoNewPrivs"] == "1" and out["setns"] == -1 and out["remount"] == -1, out
    assert sandbox.effective_capabilities() != 0 or os.geteuid() != 0  # the worker itself keeps its own


def test_a_child_answer_is_json_not_pickle():
    """A child that was taken over answers bytes: only a JSON object is taken, never unpickled."""
    assert sandbox.run_confined(lambda progress: {"frames": [1, 2]}, []) == {"frames": [1, 2]}
    with pytest.raises(sandbox.SandboxError):
        sandbox.run_confined(lambda progress: os.write(1, b"") and None or {"x": object()}, [])


@pytest.mark.slow  # a real Celery worker on the tests' Redis
def test_a_celery_worker_with_farm_untrusted_confines_each_batch(tmp_path, listener):
    """FARM_UNTRUSTED=1 on a `celery worker` (the worker's own option): the child has no network, yet the
    worker still reaches the broker and the result backend to deliver the failures."""
    import signal as signals
    import time
    import uuid

    from conftest import REDIS_PORT, redis_up, redis_url

    from farm.celery.app import app
    from farm.run.jobs import run_job

    if not redis_up():
        subprocess.run(["bash", str(ROOT / "scripts" / "ensure-redis.sh")], capture_output=True, timeout=30)
    if not redis_up():
        pytest.skip(f"no Redis on 127.0.0.1:{REDIS_PORT}")
    port, connections = listener
    redis = redis_url(15)
    tag = uuid.uuid4().hex[:8]
    queue, name = f"farm-sandbox-{tag}", f"farmsandbox-{tag}@{socket.gethostname()}"
    env = {k: v for k, v in os.environ.items() if not k.startswith("FARM_")}
    env.update(FARM_BROKER_URL=redis, FARM_RESULT_BACKEND=redis, FARM_QUEUE=queue, FARM_UNTRUSTED="1",
               FARM_RENDERER="hostile_renderer:HostileRenderer", HOSTILE_PORT=str(port),
               HOSTILE_FILE=str(tmp_path / "stolen.txt"), PYTHONPATH=os.pathsep.join([str(HERE), str(ROOT)]))
    write_samples(tmp_path / "samples")
    (tmp_path / "models").mkdir()
    for model in ("ok", "net", "crash"):
        (tmp_path / "models" / f"{model}.mdx").write_bytes((tmp_path / "samples" / "crate.mdx").read_bytes())
    (tmp_path / "job.toml").write_text('name = "u"\nsize = "16x16"\ntimestamps = [0]\nsequences = ["Stand"]\n'
                                       'models = ["models/*.mdx"]\n')
    log = tmp_path / "worker.log"
    with open(log, "wb") as logf:
        proc = subprocess.Popen([sys.executable, "-m", "celery", "-A", "tasks", "worker", "--pool", "prefork",
                                 "--concurrency", "1", "-n", name, "-l", "info", "--without-mingle",
                                 "--without-gossip"], cwd=ROOT, env=env, stdout=logf, stderr=subprocess.STDOUT,
                                start_new_session=True)
    app.conf.broker_url = app.conf.result_backend = redis
    os.environ["FARM_QUEUE"] = queue
    try:
        deadline = time.monotonic() + 60
        while not app.control.ping(destination=[name], timeout=0.5):
            assert proc.poll() is None and time.monotonic() < deadline, log.read_text()[-3000:]
        job = run_job(tmp_path / "job.toml", out=tmp_path / "out", broker=redis, progress=False)
    finally:
        os.environ.pop("FARM_QUEUE", None)
        proc.send_signal(signals.SIGTERM)
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signals.SIGKILL)
    status = {t["model"]: (t["status"], t.get("error") or "") for t in job.traces.values()}
    assert status["models/ok.mdx"][0] == "done", status
    assert status["models/net.mdx"][0] == "failed" and "Network is unreachable" in status["models/net.mdx"][1]
    assert status["models/crash.mdx"][0] == "failed" and "SIGSEGV" in status["models/crash.mdx"][1]
    assert connections == []
