"""Issue 32, item 6: the store stays out of git. `farm run` in a git work tree whose store git does
not ignore prints one hint naming the line to add to .gitignore; with that line added (so `git
check-ignore` says the store is ignored) there is no hint; outside a work tree, or without git,
none. A real run of a sample model (EGL) and real git."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

os.environ.setdefault("EGL_PLATFORM", "surfaceless")
os.environ.setdefault("PYOPENGL_PLATFORM", "egl")

from farm.cli import main  # noqa: E402
from farm.repository import store_ignore_hint  # noqa: E402
from renderer.samples import write_samples  # noqa: E402

RUN = ["run", "job.toml", "--workers", "1", "--no-progress", "--no-compare"]


@pytest.fixture
def project(tmp_path, monkeypatch) -> Path:
    if shutil.which("git") is None:
        pytest.skip("git is needed")
    for name in ("FARM_GOLDENS", "FARM_OUT", "FARM_BROKER_URL"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.chdir(tmp_path)
    write_samples(tmp_path / "all")
    (tmp_path / "models").mkdir()
    shutil.copy(tmp_path / "all" / "filter_modes.mdx", tmp_path / "models" / "filter_modes.mdx")
    shutil.copytree(tmp_path / "all" / "Textures", tmp_path / "models" / "Textures")
    (tmp_path / "job.toml").write_text('name = "s"\nsize = "16x16"\ntimestamps = [0]\nsequences = ["first"]\n'
                                       '[[models]]\npaths = ["models/*.mdx"]\n')
    return tmp_path


def hints(capsys) -> list[str]:
    return [line for line in capsys.readouterr().err.splitlines() if line.startswith("hint: the store")]


def test_a_store_git_does_not_ignore_gets_one_hint_with_the_line_to_add(project, capsys):
    subprocess.run(["git", "init", "-q", str(project)], check=True)
    capsys.readouterr()
    assert main(RUN) == 0
    (hint,) = hints(capsys)
    line = re.search(r"add the line '([^']+)'", hint).group(1)
    assert line == "/farm-out/" and str(project / ".gitignore") in hint
    (project / ".gitignore").write_text(line + "\n")
    ignored = subprocess.run(["git", "check-ignore", "-q", "farm-out"], cwd=project, check=False)
    assert ignored.returncode == 0  # the line named does ignore the store
    assert main(RUN) == 0
    assert hints(capsys) == []
    status = subprocess.run(["git", "status", "--porcelain"], cwd=project, check=True, capture_output=True, text=True)
    assert "farm-out" not in status.stdout


def test_no_hint_outside_a_work_tree_or_without_git(project, capsys, monkeypatch):
    assert store_ignore_hint(project / "farm-out") is None  # no .git above it
    subprocess.run(["git", "init", "-q", str(project)], check=True)
    (project / "farm-out").mkdir()
    assert store_ignore_hint(project / "farm-out") is not None
    assert store_ignore_hint(project / "elsewhere" / "store") is not None  # not made yet: its folder decides
    monkeypatch.setenv("PATH", str(project / "no-bin"))
    assert store_ignore_hint(project / "farm-out") is None
