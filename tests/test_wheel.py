"""The wheel, as the image installs it: built with `pip wheel --no-deps`, installed into a fresh
virtual environment, and run from a folder outside the checkout so that nothing imports from the
source tree. Offline: the new environment gets the wheel only (``--no-deps``); its dependencies come
from this environment's site-packages through a ``.pth`` line (which, unlike a site folder, runs no
``.pth`` files of its own there, so the checkout's editable install stays out)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
import tomllib
import uuid
import zipfile
from pathlib import Path

import pytest
from conftest import redis_url

ROOT = Path(__file__).resolve().parents[1]
VERSION = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]

pytestmark = pytest.mark.slow


def _run(cmd, cwd, env, timeout=300, check=True):
    r = subprocess.run([str(c) for c in cmd], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout,
                       stdin=subprocess.DEVNULL)
    if check and r.returncode != 0:
        raise AssertionError(f"{cmd} exited {r.returncode}\n{r.stdout[-3000:]}\n{r.stderr[-3000:]}")
    return r


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    # From a copy of the sources: setuptools builds in ./build and would carry whatever an earlier
    # build left there (files since deleted from the tree) into this wheel.
    src = tmp_path_factory.mktemp("src") / "modelfarm"
    shutil.copytree(ROOT, src, symlinks=True, ignore=shutil.ignore_patterns(
        ".git", ".venv", "build", "dist", "*.egg-info", "__pycache__", "demo-out", ".pytest_cache", ".ruff_cache"))
    _run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--quiet", "-w", out, src], cwd=src,
         env=os.environ.copy(), timeout=600)
    (found,) = out.glob("modelfarm-*.whl")
    return found


@pytest.fixture(scope="module")
def installed(wheel, tmp_path_factory):
    """(bin folder, environment, a working folder outside the checkout)."""
    base = tmp_path_factory.mktemp("venv")
    venv = base / "venv"
    _run([sys.executable, "-m", "venv", "--without-pip", venv], cwd=base, env=os.environ.copy())
    python = venv / "bin" / "python"
    site = Path(_run([python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"], cwd=base,
                     env=os.environ.copy()).stdout.strip())
    (site / "deps-from-test-venv.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    _run([sys.executable, "-m", "pip", "--python", python, "install", "--no-deps", "--no-index", "--quiet", wheel],
         cwd=base, env=os.environ.copy())
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env.update(PATH=f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}", EGL_PLATFORM="surfaceless",
               PYOPENGL_PLATFORM="egl")
    work = base / "work"
    work.mkdir()
    return venv / "bin", env, work


def test_the_wheel_holds_the_packages_and_the_demo_goldens_only(wheel):
    names = zipfile.ZipFile(wheel).namelist()
    tops = {n.split("/")[0] for n in names}
    assert tops == {"farm", "renderer", f"modelfarm-{VERSION}.dist-info"}
    assert "tasks.py" not in names
    assert not any(n.startswith(("tests/", "bench/", "goldens/", "docker/")) for n in names)
    committed = sorted(p.relative_to(ROOT / "goldens").as_posix() for p in (ROOT / "goldens").rglob("*") if p.is_file())
    packaged = sorted(n.removeprefix("farm/demo_goldens/") for n in names if n.startswith("farm/demo_goldens/"))
    assert packaged == committed
    for data in ("farm/report/templates/", "farm/report/static/"):
        assert any(n.startswith(data) for n in names), data
    # Every package of the checkout is in the wheel (package discovery missed none).
    for init in list((ROOT / "farm").rglob("__init__.py")) + list((ROOT / "renderer").rglob("__init__.py")):
        assert init.relative_to(ROOT).as_posix() in names
    meta = zipfile.ZipFile(wheel).read(f"modelfarm-{VERSION}.dist-info/METADATA").decode()
    for field in ("License:", "Classifier: Private :: Do Not Upload", "Requires-Python: >=3.11",
                  "Provides-Extra: test", "Maintainer-email:"):
        assert field in meta, field
    entry_points = zipfile.ZipFile(wheel).read(f"modelfarm-{VERSION}.dist-info/entry_points.txt").decode()
    assert "farm = farm.cli:main" in entry_points


def test_the_installed_package_imports_from_the_venv_not_the_checkout(installed):
    bin_, env, work = installed
    r = _run([bin_ / "python", "-c", "import farm, renderer, farm.flows.demo; print(farm.__file__);"
              " print(renderer.__file__); print(farm.flows.demo.GOLDENS)"], cwd=work, env=env)
    for line in r.stdout.split():
        assert str(bin_.parent) in line and str(ROOT) not in line, line


def test_the_version(installed):
    bin_, env, work = installed
    line = _run([bin_ / "python", "-m", "farm.version"], cwd=work, env=env).stdout.strip()
    assert line.startswith(f"farm {VERSION} (renderer ") and line.endswith(")"), line
    assert _run([bin_ / "farm", "--version"], cwd=work, env=env).stdout.strip() == line


@pytest.mark.gl
def test_farm_render_from_the_installed_wheel(installed):
    bin_, env, work = installed
    r = _run([bin_ / "python", "-c", "from renderer.samples import write_samples; import sys;"
              " print(write_samples(sys.argv[1])[0])", work / "models"], cwd=work, env=env)
    model = Path(r.stdout.split()[-1])
    _run([bin_ / "farm", "render", model, "-o", work / "crate.png", "--size", "64x64"], cwd=work, env=env)
    assert (work / "crate.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.gl
def test_farm_demo_from_the_installed_wheel_uses_the_packaged_goldens(installed):
    bin_, env, work = installed
    r = _run([bin_ / "farm", "demo", "--out", work / "demo", "--workers", "1"], cwd=work, env=env, check=False)
    # Whether the frames still match the goldens is tests/test_goldens_demo.py's business; here: the
    # installed demo finds the packaged goldens (exit 2 and "no .../manifest.toml" when it does not),
    # renders and compares against them, and nothing comes from the checkout.
    assert r.returncode in (0, 1), r.stdout[-3000:] + r.stderr[-3000:]
    summary = [ln for ln in r.stdout.splitlines() if ln.startswith("demo: ")]
    assert summary and "frames of 3 sample models compared with " in summary[-1], r.stdout[-3000:]
    assert f"{bin_.parent}" in summary[-1] and "farm/demo_goldens" in summary[-1]
    assert str(ROOT) not in r.stdout


def test_celery_finds_the_app_and_reports_no_nodes(installed):
    """celery -A farm.celery from the installed package: a clean 'no nodes replied', not an ImportError.
    A database and a destination of its own, so no other test's worker can answer."""
    bin_, env, work = installed
    env = {**env, "FARM_BROKER_URL": redis_url(13)}
    r = _run([bin_ / "python", "-m", "celery", "-A", "farm.celery", "inspect", "ping", "--timeout", "2",
              "-d", f"nobody-{uuid.uuid4().hex[:8]}@nowhere"], cwd=work, env=env, check=False, timeout=120)
    out = r.stdout + r.stderr
    if "Connection refused" in out or "Cannot connect" in out:
        pytest.skip(f"no Redis at {redis_url(13)}")
    assert r.returncode != 0
    assert "No nodes replied" in out, out[-2000:]
    assert "Traceback" not in out and "ImportError" not in out and "ModuleNotFoundError" not in out
