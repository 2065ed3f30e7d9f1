"""Tests of the build and CI plumbing: scripts/, Makefile, .ci/run, docker/.

They run the real scripts. The system-deps logic (what is missing, root or not, apt-get calls) is
also exercised against fake dpkg-query / id / apt-get programs so that no test installs anything.
"""

from __future__ import annotations

import fnmatch
import os
import re
import shutil
import signal
import socket
import stat
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
import redis
from conftest import REDIS_HOST, REDIS_PORT, ROOT

SYSTEM_DEPS = ROOT / "scripts" / "system-deps.sh"
ENSURE_REDIS = ROOT / "scripts" / "ensure-redis.sh"
CI_RUN = ROOT / ".ci" / "run"
BASH = shutil.which("bash") or "/bin/bash"


def run(cmd, *, env=None, timeout=30):
    return subprocess.run(
        [str(c) for c in cmd],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        stdin=subprocess.DEVNULL,
    )


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def write_exe(path: Path, body: str) -> None:
    path.write_text("#!" + BASH + "\n" + textwrap.dedent(body))
    path.chmod(0o755)


# --------------------------------------------------------------------------- ensure-redis.sh


def test_ensure_redis_leaves_redis_answering_on_the_tests_port():
    """make test runs ensure-redis.sh with the environment the tests then see: both use REDIS_PORT."""
    proc = run([BASH, ENSURE_REDIS])
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert redis.Redis(host=REDIS_HOST, port=REDIS_PORT, socket_timeout=2).ping() is True


def test_ensure_redis_starts_a_throwaway_server_when_none_answers():
    port = free_port()
    env = {**os.environ, "MODELFARM_REDIS_PORT": str(port)}
    client = redis.Redis(host="127.0.0.1", port=port, socket_timeout=2)
    try:
        proc = run([BASH, ENSURE_REDIS], env=env)
        assert proc.returncode == 0, proc.stdout + proc.stderr
        assert "starting one" in proc.stdout
        assert client.ping() is True
        # It keeps nothing on disk.
        assert client.config_get("save")["save"] == ""
        assert client.config_get("appendonly")["appendonly"] == "no"
        # A second call finds it and starts nothing.
        again = run([BASH, ENSURE_REDIS], env=env)
        assert again.returncode == 0
        assert "already answers" in again.stdout
    finally:
        # Stop the server this test started, by its pid (SHUTDOWN through redis-py retries the
        # dropped connection for seconds).
        try:
            pid = client.info("server")["process_id"]
        except redis.exceptions.ConnectionError:
            pid = None
        client.close()
        if pid:
            os.kill(pid, signal.SIGTERM)


def test_ensure_redis_fails_clearly_without_redis_server(tmp_path):
    # A PATH with the shell tools the script needs but neither redis-cli nor redis-server.
    bindir = tmp_path / "bin"
    bindir.mkdir()
    for tool in ("bash", "timeout", "tr"):
        (bindir / tool).symlink_to(shutil.which(tool))
    env = {"PATH": str(bindir), "MODELFARM_REDIS_PORT": str(free_port())}
    proc = run([BASH, ENSURE_REDIS], env=env)
    assert proc.returncode == 1
    assert "redis-server is not installed" in proc.stderr


def test_ensure_redis_rejects_a_bad_port():
    proc = run([BASH, ENSURE_REDIS], env={**os.environ, "MODELFARM_REDIS_PORT": "63x9"})
    assert proc.returncode == 2
    assert "port number" in proc.stderr


# --------------------------------------------------------------------------- system-deps.sh


def test_system_deps_finds_everything_on_this_machine():
    """`make test` ran system-deps before pytest, so the essentials are here; as root, all of them."""
    check = run([BASH, SYSTEM_DEPS, "--check"])
    assert check.returncode == 0, check.stdout + check.stderr
    all_present = "optional packages present" in check.stdout
    if os.geteuid() == 0:
        assert all_present, "run scripts/system-deps.sh:\n" + check.stdout
    if all_present:
        # The real run: nothing to install, so no apt-get at all, and quick.
        start = time.monotonic()
        real = run([BASH, SYSTEM_DEPS])
        assert real.returncode == 0, real.stdout + real.stderr
        assert real.stdout.strip().splitlines() == check.stdout.strip().splitlines()
        assert time.monotonic() - start < 5


@pytest.fixture
def fake_debian(tmp_path):
    """Fake dpkg-query, id and apt-get on PATH. Packages named in state/missing are not installed;
    apt-get logs its calls to state/apt.log and 'installs' by removing names from state/missing,
    unless one of the requested packages is listed in state/unavailable (then it installs nothing
    and fails, as apt-get does)."""
    bindir = tmp_path / "bin"
    state = tmp_path / "state"
    bindir.mkdir()
    state.mkdir()
    (state / "missing").write_text("")
    (state / "unavailable").write_text("")
    write_exe(
        bindir / "dpkg-query",
        f"""\
        pkg="${{@: -1}}"
        if grep -qx -- "$pkg" {state}/missing; then
          echo "dpkg-query: no packages found matching $pkg" >&2; exit 1
        fi
        printf 'install ok installed'
        """,
    )
    write_exe(bindir / "id", f'echo "$(cat {state}/uid)"\n')
    write_exe(
        bindir / "apt-get",
        f"""\
        echo "$*" >> {state}/apt.log
        pkgs=(); skip=0; verb=""
        for a in "$@"; do
          if ((skip)); then skip=0; continue; fi
          case "$a" in
            -o) skip=1 ;;
            -*) ;;
            *) if [[ -z "$verb" ]]; then verb="$a"; else pkgs+=("$a"); fi ;;
          esac
        done
        [[ "$verb" == install ]] || exit 0
        for p in "${{pkgs[@]}}"; do
          if grep -qx -- "$p" {state}/unavailable; then
            echo "E: Unable to locate package $p" >&2
            exit 100
          fi
        done
        for p in "${{pkgs[@]}}"; do
          grep -vx -- "$p" {state}/missing > {state}/missing.new || true
          mv {state}/missing.new {state}/missing
        done
        """,
    )
    env = {"PATH": f"{bindir}:/usr/bin:/bin"}

    class Fake:
        def set(self, *, uid=0, missing=(), unavailable=()):
            (state / "uid").write_text(str(uid))
            (state / "missing").write_text("".join(p + "\n" for p in missing))
            (state / "unavailable").write_text("".join(p + "\n" for p in unavailable))

        def run(self, *args):
            return run([BASH, SYSTEM_DEPS, *args], env=env)

        def apt_calls(self):
            log = state / "apt.log"
            return log.read_text().splitlines() if log.exists() else []

        def missing(self):
            return (state / "missing").read_text().split()

    return Fake()


def test_system_deps_as_root_with_everything_present_never_calls_apt(fake_debian):
    fake_debian.set(uid=0)
    proc = fake_debian.run()
    assert proc.returncode == 0
    assert "present" in proc.stdout
    assert fake_debian.apt_calls() == []


def test_system_deps_as_root_updates_once_then_installs_the_missing(fake_debian):
    fake_debian.set(uid=0, missing=["libegl1", "chromium", "libosmesa6"])
    proc = fake_debian.run()
    assert proc.returncode == 0, proc.stdout + proc.stderr
    calls = fake_debian.apt_calls()
    assert len(calls) == 2
    assert "update" in calls[0].split()
    install = calls[1].split()
    assert "install" in install and "-y" in install
    assert {"libegl1", "chromium", "libosmesa6"} <= set(install)
    assert fake_debian.missing() == []


def test_system_deps_as_root_still_installs_egl_when_an_optional_package_is_unavailable(fake_debian):
    fake_debian.set(uid=0, missing=["libegl-mesa0", "chromium-driver"], unavailable=["chromium-driver"])
    proc = fake_debian.run()
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert fake_debian.missing() == ["chromium-driver"]
    assert "optional packages still missing: chromium-driver" in proc.stdout
    assert sum("update" in c.split() for c in fake_debian.apt_calls()) == 1


def test_system_deps_as_root_fails_when_egl_cannot_be_installed(fake_debian):
    fake_debian.set(uid=0, missing=["libgl1-mesa-dri"], unavailable=["libgl1-mesa-dri"])
    proc = fake_debian.run()
    assert proc.returncode == 1
    assert "essential packages still missing: libgl1-mesa-dri" in proc.stdout


def test_system_deps_not_root_names_optional_packages_and_passes(fake_debian):
    fake_debian.set(uid=1000, missing=["chromium", "redis-server"])
    proc = fake_debian.run()
    assert proc.returncode == 0
    assert "apt-get install -y --no-install-recommends redis-server chromium" in proc.stdout
    assert fake_debian.apt_calls() == []


def test_system_deps_not_root_fails_when_egl_is_missing(fake_debian):
    fake_debian.set(uid=1000, missing=["libegl1", "fonts-dejavu-core"])
    proc = fake_debian.run()
    assert proc.returncode == 1
    assert "essential (headless EGL rendering): libegl1" in proc.stdout
    assert "apt-get install -y --no-install-recommends libegl1 fonts-dejavu-core" in proc.stdout
    assert fake_debian.apt_calls() == []


def test_system_deps_check_only_never_installs_even_as_root(fake_debian):
    fake_debian.set(uid=0, missing=["libglfw3"])
    proc = fake_debian.run("--check")
    assert proc.returncode == 0
    assert "libglfw3" in proc.stdout
    assert fake_debian.apt_calls() == []


def test_system_deps_rejects_unknown_arguments(fake_debian):
    fake_debian.set(uid=0)
    assert fake_debian.run("--instal").returncode == 2


# --------------------------------------------------------------------------- headless GL


@pytest.mark.gl
def test_surfaceless_egl_gives_a_desktop_gl_context():
    """What system-deps promises: PyOpenGL + Mesa EGL, no display. In a child process: no GL here."""
    probe = textwrap.dedent(
        """\
        import ctypes
        from OpenGL import EGL, GL
        dpy = EGL.eglGetDisplay(EGL.EGL_DEFAULT_DISPLAY)
        assert EGL.eglInitialize(dpy, None, None), "eglInitialize"
        cfg, n = EGL.EGLConfig(), EGL.EGLint()
        attrs = (EGL.EGLint * 5)(EGL.EGL_SURFACE_TYPE, EGL.EGL_PBUFFER_BIT,
                                 EGL.EGL_RENDERABLE_TYPE, EGL.EGL_OPENGL_BIT, EGL.EGL_NONE)
        assert EGL.eglChooseConfig(dpy, attrs, ctypes.pointer(cfg), 1, ctypes.pointer(n)) and n.value
        assert EGL.eglBindAPI(EGL.EGL_OPENGL_API)
        ctx = EGL.eglCreateContext(dpy, cfg, EGL.EGL_NO_CONTEXT, None)
        assert EGL.eglMakeCurrent(dpy, EGL.EGL_NO_SURFACE, EGL.EGL_NO_SURFACE, ctx), "eglMakeCurrent"
        print(GL.glGetString(GL.GL_RENDERER).decode())
        print(GL.glGetString(GL.GL_VERSION).decode())
        """
    )
    env = {**os.environ, "EGL_PLATFORM": "surfaceless", "PYOPENGL_PLATFORM": "egl"}
    env.pop("DISPLAY", None)
    proc = run([sys.executable, "-c", probe], env=env)
    assert proc.returncode == 0, proc.stderr
    renderer, version = proc.stdout.strip().splitlines()[-2:]
    assert renderer
    assert not version.startswith("OpenGL ES"), "PyOpenGL fell back to GLES: is libopengl0 installed?"


# --------------------------------------------------------------------------- Makefile, .ci/run, README


def test_ci_run_is_an_executable_strict_bash_script_ending_in_make_test():
    mode = CI_RUN.stat().st_mode
    assert mode & stat.S_IXUSR, ".ci/run must be executable"
    text = CI_RUN.read_text()
    assert text.startswith("#!/usr/bin/env bash\n") or text.startswith("#!/bin/bash\n")
    assert "set -euo pipefail" in text
    assert run([BASH, "-n", CI_RUN]).returncode == 0
    commands = [ln.strip() for ln in text.splitlines() if ln.strip() and not ln.strip().startswith("#")]
    # Nothing may print after pytest's closing line, and make's status is the script's status.
    assert re.fullmatch(r"(exec\s+)?make\s+test(\s+</dev/null)?", commands[-1]), commands[-1]
    assert "-q -q" not in text and "-qq" not in text


def make_dry_run(target: str) -> list[str]:
    proc = run(["make", "-n", "-B", target])
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.splitlines()


def index_of(lines: list[str], pattern: str) -> int:
    for i, line in enumerate(lines):
        if re.search(pattern, line):
            return i
    raise AssertionError(f"no line matches {pattern!r} in:\n" + "\n".join(lines))


def test_make_test_runs_its_steps_in_order_with_headless_gl():
    lines = make_dry_run("test")
    steps = [
        r"scripts/system-deps\.sh",
        r"-m venv \.venv",
        r"\.venv/bin/pip install -e '\.\[test\]'",
        r"\.venv/bin/ruff check \.",
        r"scripts/ensure-redis\.sh",
        r"\.venv/bin/python -m pytest",
    ]
    positions = [index_of(lines, s) for s in steps]
    assert positions == sorted(positions)
    pytest_line = lines[positions[-1]]
    assert "EGL_PLATFORM=surfaceless" in pytest_line and "PYOPENGL_PLATFORM=egl" in pytest_line
    assert re.search(r"pytest -q$", pytest_line), pytest_line
    assert not any("ruff format" in line for line in lines)


def test_make_test_fast_runs_the_same_steps_without_the_slow_tests():
    lines = make_dry_run("test-fast")
    steps = [r"\.venv/bin/ruff check \.", r"scripts/ensure-redis\.sh", r"\.venv/bin/python -m pytest"]
    positions = [index_of(lines, s) for s in steps]
    assert positions == sorted(positions)
    pytest_line = lines[positions[-1]]
    assert "EGL_PLATFORM=surfaceless" in pytest_line and "PYOPENGL_PLATFORM=egl" in pytest_line
    assert re.search(r"pytest -q -m \"not slow\"$", pytest_line), pytest_line
    assert "make test-fast" in (ROOT / "README.md").read_text()


def test_make_demo_runs_farm_demo():
    lines = make_dry_run("demo")
    demo = index_of(lines, r"\.venv/bin/farm demo --out demo-out")
    assert index_of(lines, r"scripts/system-deps\.sh") < demo
    assert "EGL_PLATFORM=surfaceless" in lines[demo]


def test_readme_quick_start_is_the_two_make_commands():
    readme = (ROOT / "README.md").read_text()
    quick = readme.split("## Quick start", 1)[1].split("\n## ", 1)[0]
    block = re.search(r"```sh\n(.*?)```", quick, re.S)
    assert block and block.group(1).split("\n")[:-1] == ["make demo", "make test"]


# --------------------------------------------------------------------------- docker/


def test_docker_build_context_and_dockerignore_fit_the_dockerfile():
    compose = (ROOT / "docker" / "compose.yaml").read_text()
    assert re.search(r"^\s+context: \.\.$", compose, re.M)
    assert re.search(r"^\s+dockerfile: docker/Dockerfile$", compose, re.M)
    dockerfile = (ROOT / "docker" / "Dockerfile").read_text()
    assert dockerfile.startswith("#") and "ARG PYTHON_IMAGE=python:3.11-slim-bookworm" in dockerfile
    # The image installs the wheel, which has no top-level tasks module (tests/test_deploy_compose.py).
    assert 'CMD ["celery", "-A", "farm.celery", "worker", "--pool=prefork", "--loglevel=info"]' in dockerfile
    # What the image build needs must get through .dockerignore (pyproject names README.md).
    ignored = [
        ln.strip() for ln in (ROOT / ".dockerignore").read_text().splitlines() if ln.strip() and not ln.startswith("#")
    ]
    for needed in ("pyproject.toml", "README.md", "tasks.py", "farm", "renderer", "goldens"):
        assert not any(fnmatch.fnmatch(needed, pat) for pat in ignored), needed
    for excluded in (".venv", ".git", "out", "demo-out"):
        assert excluded in ignored


def test_readme_puts_farm_on_path_after_the_quick_start():
    """The quick start ends with a working `farm` on PATH: the README's activate line, run in a shell whose
    PATH has no venv, finds the project's own `farm` and it answers."""
    readme = (ROOT / "README.md").read_text()
    quick = readme.split("## Quick start", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```sh\n(.*?)```", quick, re.S)
    assert len(blocks) == 2, "the quick start: the two make commands, then how to put farm on PATH"
    activate = blocks[1].strip()
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHONPATH")}
    env["PATH"] = "/usr/local/bin:/usr/bin:/bin"
    proc = run([BASH, "-c", f"{activate} && command -v farm && farm --version"], env=env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    where, version = proc.stdout.split("\n")[:2]
    assert Path(where).resolve().parent == (ROOT / ".venv" / "bin").resolve()
    assert version.startswith("farm "), proc.stdout
    assert "activate" in "\n".join(make_dry_run("demo")), "make demo ends by saying how to get farm on PATH"
