"""docker/compose.yaml read by a real compose implementation, podman-compose (`config`), not only by
this repository's own reading of it (tests/test_deploy_compose.py): what compose makes of the file
with the settings a user sets is what the code accepts. podman-compose needs podman, which
scripts/system-deps.sh installs; without either the test says so. (Starting the services needs
`podman run`, which this sandbox refuses: `crun: setrlimit RLIMIT_NPROC`, issue 36.)"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

yaml = pytest.importorskip("yaml")

from farm.celery.app import DEFAULT_QUEUE, NIGHTLY_QUEUE  # noqa: E402
from farm.cli import build_parser  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
COMPOSE = shutil.which("podman-compose") or str(Path(sys.executable).parent / "podman-compose")
USER_ENV = {"FLOWER_BASIC_AUTH": "admin:pw", "FARM_SERVE_TOKEN": "t0ken", "FARM_COMPOSE_OUT": "s3://bucket/prefix"}


def _why_not() -> str | None:
    if not Path(COMPOSE).exists():
        return "podman-compose is not installed (pip install '.[test]')"
    if shutil.which("podman") is None:
        return "podman is not installed (scripts/system-deps.sh installs it as root)"
    return None


pytestmark = pytest.mark.skipif(_why_not() is not None, reason=_why_not() or "")


@pytest.fixture(scope="module")
def services() -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("FARM_", "FLOWER_"))}
    done = subprocess.run([COMPOSE, "--profile", "triage", "-f", "compose.yaml", "config"], cwd=ROOT / "docker",
                          env={**env, **USER_ENV}, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    return yaml.safe_load(done.stdout)["services"]


def test_compose_reads_every_service_and_the_triage_profile(services):
    assert set(services) == {"redis", "worker", "nightly", "beat", "flower", "serve"}
    for name in ("worker", "nightly", "beat", "serve"):  # the farm's own image (redis and flower are upstream's)
        build = services[name]["build"]
        assert build["dockerfile"] == "docker/Dockerfile" and Path(build["context"]) == ROOT, name
        assert services[name]["image"] == services["worker"]["image"], name


def test_every_farm_command_is_accepted_by_the_cli_with_its_flags(services):
    parser = build_parser(with_project=False)
    farm_commands = [s["command"] for s in services.values() if (s.get("command") or [""])[0] == "farm"]
    assert farm_commands
    for cmd in farm_commands:
        args = parser.parse_args(cmd[1:])  # SystemExit (a usage error) fails the test
        assert callable(args.func)


def test_celery_commands_and_health_checks_name_the_app_and_its_queues(services):
    queues = set()
    for name in ("worker", "nightly", "beat"):
        cmd = services[name]["command"]
        assert cmd[:3] == ["celery", "-A", "farm.celery"] and cmd[3] in ("worker", "beat"), name
        if "-Q" in cmd:
            queues |= set(cmd[cmd.index("-Q") + 1].split(","))
    assert queues <= {DEFAULT_QUEUE, NIGHTLY_QUEUE}
    for name in ("worker", "nightly"):
        test = services[name]["healthcheck"]["test"]
        assert test[0] == "CMD-SHELL" and test[1].startswith("celery -A farm.celery inspect ping -d "), name
    assert services["redis"]["healthcheck"]["test"] == ["CMD", "redis-cli", "ping"]


def test_the_store_setting_reaches_every_farm_service_serve_included(services):
    for name in ("worker", "nightly", "beat", "serve", "flower"):
        assert services[name]["environment"]["FARM_OUT"] == "s3://bucket/prefix", name
    serve = services["serve"]["command"]
    assert "--out" not in serve and serve[2] == "latest"  # FARM_SERVE_RUN unset: the newest run
    assert services["serve"]["environment"]["FARM_SERVE_TOKEN"] == "t0ken"
