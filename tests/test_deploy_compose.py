"""docker/: the compose file, the Dockerfile, the smoke script and their README, checked against the
code they deploy (no Docker needed).

The compose file is parsed (PyYAML) and interpolated the way `docker compose` does with an empty
host environment (``${VAR:-default}``, ``${VAR:?error}``, ``$$``), then each service is compared with
what the code expects: queue names, FARM_* variables, the Celery delivery settings
(farm.celery.app.config_from_env, read from the code, never copied here), the nightly schedule.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import tomllib
from pathlib import Path

import pytest

yaml = pytest.importorskip("yaml")

from farm.celery.app import (  # noqa: E402
    DEFAULT_QUEUE,
    NIGHTLY_QUEUE,  # noqa: E402
    beat_schedule,
    config_from_env,
)
from farm.celery.app import NIGHTLY_TASK as TASK_NAME  # noqa: E402
from farm.environment import nightly_settings  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
DOCKER = ROOT / "docker"
COMPOSE = DOCKER / "compose.yaml"
DOCKERFILE = DOCKER / "Dockerfile"
README = DOCKER / "README.md"
SMOKE = DOCKER / "smoke.sh"

# FARM_* variables the compose file hands to a service before the code reads them: each is waiting
# for another change (listed in docker/README.md, "Triage"), and only the named service may use it.
PENDING: dict[str, str] = {}  # FARM_* variables compose gives that the code does not read yet

_VAR = re.compile(r"\$\$|\$\{([A-Za-z_][A-Za-z0-9_]*)(?:(:?[-?])([^}]*))?\}|\$([A-Za-z_][A-Za-z0-9_]*)")


def interpolate(value, env: dict[str, str], seen: set[str] | None = None):
    """Compose's variable interpolation of one value (recursively through lists and mappings)."""
    if isinstance(value, dict):
        return {k: interpolate(v, env, seen) for k, v in value.items()}
    if isinstance(value, list):
        return [interpolate(v, env, seen) for v in value]
    if not isinstance(value, str):
        return value

    def sub(m: re.Match) -> str:
        if m.group(0) == "$$":
            return "$"
        name = m.group(1) or m.group(4)
        if seen is not None:
            seen.add(name)
        op, arg = m.group(2), m.group(3)
        val = env.get(name)
        if op in (":-", ":?"):
            missing = not val
        else:
            missing = val is None
        if op and op.endswith("-") and missing:
            return arg
        if op and op.endswith("?") and missing:
            raise KeyError(f"{name}: {arg}")
        return val or ""

    return _VAR.sub(sub, value)


def raw_compose() -> dict:
    return yaml.safe_load(COMPOSE.read_text())


def compose(env: dict[str, str] | None = None) -> dict:
    env = {"FLOWER_BASIC_AUTH": "farm:secret"} if env is None else env
    return interpolate(raw_compose(), env)


def host_variables() -> set[str]:
    seen: set[str] = set()
    interpolate(raw_compose(), {"FLOWER_BASIC_AUTH": "x"}, seen)
    return seen


def environment(service: dict) -> dict[str, str]:
    env = service.get("environment") or {}
    if isinstance(env, list):
        env = dict(item.split("=", 1) for item in env)
    return {k: "" if v is None else str(v) for k, v in env.items()}


def duration(text) -> float:
    """A compose duration (``2m30s``, ``90s``, ``1h``) in seconds."""
    if isinstance(text, int | float):
        return float(text)
    parts = re.findall(r"(\d+(?:\.\d+)?)(us|ms|s|m|h)", text)
    assert parts and "".join(a + b for a, b in parts) == text, f"not a compose duration: {text!r}"
    scale = {"us": 1e-6, "ms": 1e-3, "s": 1, "m": 60, "h": 3600}
    return sum(float(a) * scale[b] for a, b in parts)


def option(command: list[str], *names: str) -> str | None:
    for i, arg in enumerate(command):
        for name in names:
            if arg == name and i + 1 < len(command):
                return command[i + 1]
            if arg.startswith(name + "="):
                return arg.split("=", 1)[1]
    return None


def named_volumes(service: dict) -> dict[str, str]:
    """target -> volume name, for the service's named-volume mounts."""
    declared = set(raw_compose().get("volumes") or {})
    out = {}
    for v in service.get("volumes") or []:
        src, _, rest = v.partition(":")
        if src in declared:
            out[rest.split(":")[0]] = src
    return out


def farm_sources() -> str:
    return "\n".join(p.read_text() for p in sorted((ROOT / "farm").rglob("*.py")))


# ------------------------------------------------------------------------------------ services


def test_the_services_of_the_nightly_story_are_all_there():
    services = compose()["services"]
    assert {"redis", "worker", "nightly", "beat", "flower", "serve"} <= set(services)
    farm_images = {name for name, s in services.items() if s.get("image") == "modelfarm-worker:latest"}
    assert farm_images == {"worker", "nightly", "beat", "serve"}
    for name in farm_images:  # each can build the image it runs, so `up --build` never pulls it
        assert services[name]["build"] == {"context": "..", "dockerfile": "docker/Dockerfile"}, name


def test_redis_keeps_queued_batches_across_restarts():
    redis = compose()["services"]["redis"]
    cmd = redis["command"]
    assert option(cmd, "--appendonly") == "yes"
    assert option(cmd, "--save") not in (None, "")
    assert option(cmd, "--maxmemory-policy") == "noeviction"
    data_dir = option(cmd, "--dir") or "/data"
    assert named_volumes(redis).get(data_dir) == "redis-data"
    assert "ports" not in redis  # unauthenticated: never published by default


def _worker(name: str) -> tuple[dict, list[str], dict[str, str]]:
    s = compose()["services"][name]
    return s, s["command"], environment(s)


@pytest.mark.parametrize("name", ["worker", "nightly"])
def test_workers_have_a_health_check_that_pings_themselves(name):
    s, cmd, _ = _worker(name)
    assert cmd[:4] == ["celery", "-A", "farm.celery", "worker"]
    node = option(cmd, "-n", "--hostname")
    assert node and node.endswith("@%h")
    test = s["healthcheck"]["test"]
    assert test[0] == "CMD-SHELL"
    # $$HOSTNAME in the file is $HOSTNAME in the container: the node name Celery gives %h there.
    assert f"celery -A farm.celery inspect ping -d {node.replace('%h', '$HOSTNAME')} " in test[1]
    assert duration(s["healthcheck"]["timeout"]) > 10  # longer than the ping's own --timeout 10
    assert s["healthcheck"]["start_period"]


@pytest.mark.parametrize("name", ["worker", "nightly"])
def test_stopping_a_worker_returns_its_batches_promptly(name):
    """docker stop sends SIGTERM; under REMAP_SIGTERM=SIGQUIT Celery does a cold shutdown whose soft
    phase lets running batches finish for worker_soft_shutdown_timeout, then cancels the rest, which
    (late acks) go back to the queue when the worker closes its connection. stop_grace_period must
    leave time for that, or Docker's SIGKILL strands them until the visibility timeout."""
    s, _, env = _worker(name)
    cfg = config_from_env(env)
    assert cfg["task_acks_late"] and cfg["task_reject_on_worker_lost"]
    assert env.get("REMAP_SIGTERM") == "SIGQUIT"
    soft_shutdown = cfg["worker_soft_shutdown_timeout"]
    assert soft_shutdown == float(env["FARM_SOFT_SHUTDOWN_TIMEOUT"]) > 0
    grace = duration(s["stop_grace_period"])
    assert grace >= soft_shutdown + 30, "room to cancel, requeue and close the GL contexts before SIGKILL"
    visibility = cfg["broker_transport_options"]["visibility_timeout"]
    assert visibility > cfg["task_time_limit"] > cfg["task_soft_time_limit"]
    assert grace < visibility
    assert s.get("init") is True  # tini forwards SIGTERM to Celery and reaps the pool


def test_render_workers_have_a_cpu_limit_and_derive_their_threads_from_it():
    s, cmd, env = _worker("worker")
    assert float(s["cpus"]) >= 1
    concurrency = option(cmd, "--concurrency", "-c")
    assert concurrency and int(concurrency) >= 1
    assert "LP_NUM_THREADS" not in env  # derived per process from the CPU limit (renderer.gl.threads)
    assert "ports" not in s and "container_name" not in s  # --scale worker=N works
    queue = option(cmd, "-Q", "--queues")
    assert queue in (None, DEFAULT_QUEUE)  # None: the app's task_default_queue (FARM_QUEUE or "farm")
    assert config_from_env(env)["task_default_queue"] == DEFAULT_QUEUE


def test_a_worker_of_its_own_consumes_the_nightly_queue():
    s, cmd, env = _worker("nightly")
    assert option(cmd, "-Q", "--queues") == NIGHTLY_QUEUE
    assert option(cmd, "--concurrency", "-c") == "1"
    settings = nightly_settings(env)
    assert settings is not None and settings["queue"] == NIGHTLY_QUEUE
    _, worker_cmd, worker_env = _worker("worker")
    assert NIGHTLY_QUEUE not in (option(worker_cmd, "-Q", "--queues") or "")  # renderers never block on it
    # The manifest beat names must be where the nightly worker and the render workers read it.
    for name in ("worker", "nightly"):
        mounts = compose()["services"][name]["volumes"]
        assert any(m.split(":")[1] == "/data/assets" for m in mounts), name
    assert settings["manifest"].startswith("/data/assets/")


def test_beat_schedules_the_nightly_run_and_keeps_its_schedule_in_a_volume():
    s = compose()["services"]["beat"]
    cmd = s["command"]
    assert cmd[:4] == ["celery", "-A", "farm.celery", "beat"]
    schedule = option(cmd, "--schedule", "-s")
    assert schedule and schedule.startswith("/")
    folder = str(Path(schedule).parent)
    assert named_volumes(s).get(folder) == "farm-beat"
    # The image creates that folder owned by its user, so the new volume is writable by beat.
    dockerfile = DOCKERFILE.read_text()
    assert re.search(rf"mkdir -p [^\n]*{re.escape(folder)}", dockerfile)
    assert re.search(rf"chown farm:farm [^\n]*{re.escape(folder)}", dockerfile)
    entry = beat_schedule(environment(s))["farm-nightly"]
    assert entry["task"] == TASK_NAME and entry["options"]["queue"] == NIGHTLY_QUEUE
    assert "replicas" not in (s.get("deploy") or {})  # one beat per farm


def test_flower_needs_a_password_listens_on_loopback_and_shares_the_broker():
    with pytest.raises(KeyError, match="FLOWER_BASIC_AUTH"):
        compose({})  # compose refuses to start without it
    s = compose({"FLOWER_BASIC_AUTH": "farm:secret"})["services"]["flower"]
    env = environment(s)
    assert env["FLOWER_BASIC_AUTH"] == "farm:secret"
    worker_env = environment(compose()["services"]["worker"])
    assert env["FARM_BROKER_URL"] == worker_env["FARM_BROKER_URL"]
    command = " ".join(s["command"])
    assert "redis://" not in command and "$FARM_BROKER_URL" in command
    assert s["ports"] == ["127.0.0.1:5555:5555"]
    moved = compose({"FLOWER_BASIC_AUTH": "a:b", "FARM_PUBLISH_ADDRESS": "10.0.0.5"})["services"]["flower"]
    assert moved["ports"] == ["10.0.0.5:5555:5555"]


def test_serve_is_on_demand_bound_to_the_container_interface_behind_a_token():
    s = compose()["services"]["serve"]
    assert s["profiles"] == ["triage"]
    cmd = s["command"]
    assert cmd[:2] == ["farm", "serve"]
    assert option(cmd, "--host") == "0.0.0.0"
    port = option(cmd, "--port")
    assert s["ports"] == [f"127.0.0.1:{port}:{port}"]
    assert "FARM_SERVE_TOKEN" in environment(s)
    assert named_volumes(s).get("/data/out") == "farm-out"
    assert any(m.endswith(":/data/goldens") for m in s["volumes"])  # approvals write the goldens


def test_serve_accepts_what_the_compose_service_gives_it(tmp_path, monkeypatch):
    """The serve service's command, as compose gives it with FARM_SERVE_RUN unset, parsed by farm's own
    parser: the newest run of the store FARM_OUT names (no --out of its own, so FARM_COMPOSE_OUT's
    bucket applies too), served on the container's address with FARM_SERVE_TOKEN and refused without."""
    import threading
    import urllib.error
    import urllib.request

    from golden_runs import image, key, make_run

    from farm.cli import build_parser
    from farm.cli.common import load_job
    from farm.serve.server import ReportServer, make_server

    cmd = compose({"FARM_SERVE_TOKEN": "s3cret", "FLOWER_BASIC_AUTH": "x:y"})["services"]["serve"]["command"]
    args = build_parser(with_project=False).parse_args(cmd[1:])
    assert args.run == "latest" and args.out is None and args.host == "0.0.0.0"
    run = make_run(tmp_path / "store", {key(): image(1)})
    monkeypatch.setenv("FARM_OUT", str(tmp_path / "store"))
    assert load_job(args.run, args.out).id == run.id
    state = ReportServer(run, tmp_path / "goldens", token="s3cret")
    with pytest.raises(ValueError, match="only with FARM_SERVE_TOKEN"):
        make_server(state, args.host, 0)
    server = make_server(state, args.host, 0, token="s3cret")
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}/"
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(url, timeout=10)
        assert refused.value.code == 401
        browser = urllib.request.build_opener(urllib.request.HTTPCookieProcessor())  # keeps the cookie
        with browser.open(url + "?token=s3cret", timeout=10) as page:  # the redirect sets the cookie
            assert page.status == 200 and b"<html" in page.read().lower()
    finally:
        server.shutdown()
        server.server_close()
        state.close()


# ------------------------------------------------------------------------------- variables, docs


def test_every_farm_variable_given_to_a_service_is_read_by_the_code():
    sources = farm_sources()
    for name, s in compose()["services"].items():
        for var in environment(s):
            if not var.startswith("FARM_"):
                continue
            if var in PENDING:
                assert PENDING[var] == name, f"{var} is only for {PENDING[var]}"
                continue
            assert re.search(rf"\b{var}\b", sources), f"{name}: {var} is not read anywhere in farm/"


def test_queue_names_in_the_compose_file_exist_in_the_code():
    queues = set()
    for s in compose()["services"].values():
        cmd = s.get("command") or []
        if isinstance(cmd, list) and (q := option(cmd, "-Q", "--queues")):
            queues |= set(q.split(","))
    assert queues and queues <= {DEFAULT_QUEUE, NIGHTLY_QUEUE}


def test_every_host_variable_of_the_compose_file_is_documented():
    readme, example = README.read_text(), (DOCKER / "env.example").read_text()
    for var in sorted(host_variables()):
        assert f"`{var}`" in readme, f"{var} is not in docker/README.md"
        assert re.search(rf"^#? ?{var}=", example, re.M), f"{var} is not in docker/env.example"


def test_the_readme_mounts_services_and_links_match_the_repository():
    text = README.read_text()
    services = set(compose()["services"])
    for svc in re.findall(r"\brun --rm (?:-\S+ )*([a-z]+)", text):
        assert svc in services, f"docker/README.md runs a service {svc!r} that compose.yaml does not have"
    for svc in services:
        assert f"`{svc}`" in text, f"docker/README.md does not describe the service {svc!r}"
    mounts = {m.split(":")[1] for s in compose()["services"].values() for m in s.get("volumes") or []}
    for path in re.findall(r"(/data/[a-z]+)", text):
        assert path in mounts, f"docker/README.md mentions {path}, which no service mounts"
    for target in re.findall(r"\]\(([^)#]+)(?:#[^)]*)?\)", text):
        if re.match(r"[a-z]+://", target):
            continue
        resolved = (DOCKER / target).resolve()
        assert resolved.is_relative_to(ROOT), f"link outside the repository: {target}"
        assert resolved.exists(), f"dead link: {target}"
    assert "../shared" not in text
    assert "demo-out" not in text or "make demo" in text


# ----------------------------------------------------------------------------------- Dockerfile


def _stages(text: str) -> list[str]:
    return re.split(r"^FROM ", text, flags=re.M)[1:]


def test_the_image_is_built_in_two_stages_and_ships_no_tests():
    text = DOCKERFILE.read_text()
    stages = _stages(text)
    assert len(stages) == 2 and stages[0].startswith("${PYTHON_IMAGE} AS build")
    assert re.search(r"^ARG PYTHON_IMAGE=python:3\.11-slim-bookworm$", text, re.M)
    runtime = "\n".join(ln for ln in stages[1].splitlines() if not ln.lstrip().startswith("#"))  # no comments
    assert "pip install --no-index --find-links /wheels 'modelfarm[s3]'" in runtime  # the S3 store's boto3 too
    assert "COPY . ." not in text and " -e " not in text and "[test]" not in text
    for word in ("tests", "bench", "pytest", "hypothesis", "ruff"):
        assert not re.search(rf"\b{word}\b", runtime), word
    for package in ("libegl1", "libegl-mesa0", "libgl1-mesa-dri", "libopengl0", "libosmesa6"):
        assert package in runtime
    assert re.search(r"^USER farm$", runtime, re.M)
    assert "python -m farm.version" in runtime  # smoke test at build, health check at run
    assert re.search(r'^CMD \["celery", "-A", "farm.celery", "worker"', runtime, re.M)


def test_the_image_labels_carry_the_package_version():
    version = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    runtime = _stages(DOCKERFILE.read_text())[1]
    assert re.search(rf"^ARG VERSION={re.escape(version)}$", runtime, re.M)
    for label in ("title", "description", "version", "revision", "created", "vendor"):
        assert f"org.opencontainers.image.{label}=" in runtime


def test_what_the_build_stage_copies_gets_through_dockerignore():
    import fnmatch

    ignored = [ln.strip() for ln in (ROOT / ".dockerignore").read_text().splitlines()
               if ln.strip() and not ln.startswith("#")]
    copied = re.findall(r"^COPY (?!--from)(.+) \S+$", DOCKERFILE.read_text(), re.M)
    for src in " ".join(copied).split():
        assert (ROOT / src).exists(), src
        assert not any(fnmatch.fnmatch(src, pat) for pat in ignored), src


# ------------------------------------------------------------------------------------- smoke.sh


def test_smoke_script_is_valid_bash_and_shellcheck_clean():
    assert SMOKE.stat().st_mode & 0o111, "docker/smoke.sh must be executable"
    subprocess.run(["bash", "-n", str(SMOKE)], check=True)
    text = SMOKE.read_text()
    assert "compose" in text and " down" in text
    if shutil.which("shellcheck"):
        r = subprocess.run(["shellcheck", "-x", str(SMOKE)], capture_output=True, text=True)
        assert r.returncode == 0, r.stdout + r.stderr
