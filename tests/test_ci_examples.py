"""Issue 32, item 3: the CI recipe is real files, and the pull-request loop closes with them.

examples/ci/github-actions.yml and examples/ci/gitlab-ci.yml parse as YAML and have the shape
their CI reads (GitHub: on pull_request, jobs.*.steps each a `uses` or a `run`; GitLab: the report
as artifacts, junit.xml as the test report); every `farm ...` command line in them (steps and
comments) is accepted by the command line's own parser with exactly the flags written there (no
abbreviation). Then the loop itself, with real renders: a git repository of sample models and
their goldens; a branch changes a model; clone "runner" runs the workflow's own `farm run` line
(with GitHub's variables) and writes its report; its store is deleted; clone "laptop" gets the
report folder alone (the artifact), runs the approve command summary.md prints, and commits the
goldens; the runner's rerun of that commit passes."""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

os.environ.setdefault("EGL_PLATFORM", "surfaceless")
os.environ.setdefault("PYOPENGL_PLATFORM", "egl")

from farm.cli import build_parser, main  # noqa: E402
from farm.goldens import GoldenIndex  # noqa: E402
from renderer.formats import load_model, save_model  # noqa: E402
from renderer.samples import write_samples  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
GITHUB = ROOT / "examples" / "ci" / "github-actions.yml"
GITLAB = ROOT / "examples" / "ci" / "gitlab-ci.yml"


def farm_lines(path: Path) -> list[str]:
    """Every `farm ...` command line in a CI file: in run/script steps and in its comments
    (backslash continuations joined, a trailing comment dropped)."""
    text = path.read_text().replace("\\\n", " ")
    lines = []
    for raw in text.splitlines():
        line = raw.strip().lstrip("#").strip().removeprefix("- ").strip()
        if line.startswith("run: "):
            line = line[len("run: "):]
        if re.match(r"farm [a-z]", line):
            lines.append(line.split("  #", 1)[0].strip())
    return lines


def parse_exactly(line: str):
    """The parsed command line; fails when the parser rejects it or a flag is only an abbreviation."""
    argv = shlex.split(line)[1:]
    parser = build_parser(with_project=False)
    try:
        args = parser.parse_args(argv)
    except SystemExit:
        pytest.fail(f"farm's parser refuses: {line}")
    sub = next(a for a in parser._actions if a.dest == "command").choices[argv[0]]
    for token in argv:
        if token.startswith("-") and token != "-":
            flag = token.split("=", 1)[0]
            assert flag in sub._option_string_actions, f"{flag} is not an option of farm {argv[0]} (in: {line})"
    return args


def test_the_github_workflow_has_the_shape_github_reads():
    doc = yaml.safe_load(GITHUB.read_text())
    on = doc.get("on", doc.get(True))  # YAML 1.1 reads a bare `on` as true
    assert "pull_request" in on
    assert doc["permissions"]["pull-requests"] == "write"
    (job,) = doc["jobs"].values()
    steps = job["steps"]
    assert all(isinstance(s, dict) and (("uses" in s) != ("run" in s)) for s in steps)
    uses = [s["uses"].split("@")[0] for s in steps if "uses" in s]
    assert uses == ["actions/checkout", "actions/setup-python", "actions/upload-artifact"]
    upload = next(s for s in steps if s.get("uses", "").startswith("actions/upload-artifact"))
    runs = [s["run"] for s in steps if "run" in s]
    farm_run = next(r for r in runs if r.startswith("farm run"))
    args = parse_exactly(farm_run)
    assert upload["with"]["path"].rstrip("/") == args.report == upload["with"]["name"]
    assert upload["if"] == "${{ !cancelled() }}"  # the report is uploaded when the comparison fails too
    assert any("GITHUB_STEP_SUMMARY" in r and f"{args.report}/summary.md" in r for r in runs)
    assert any("gh pr comment" in r for r in runs)
    assert "apt-get install" in "\n".join(runs) and "libegl-mesa0" in "\n".join(runs)


def test_the_gitlab_job_keeps_the_report_and_its_junit():
    doc = yaml.safe_load(GITLAB.read_text())
    (job,) = [v for k, v in doc.items() if isinstance(v, dict) and "script" in v]
    args = parse_exactly(next(s for s in job["script"] if s.startswith("farm run")))
    art = job["artifacts"]
    assert art["when"] == "always"
    assert [p.rstrip("/") for p in art["paths"]] == [args.report]
    assert art["reports"]["junit"] == f"{args.report}/junit.xml"
    assert any("merge_request_event" in r["if"] for r in job["rules"])


@pytest.mark.parametrize("path", [GITHUB, GITLAB], ids=["github", "gitlab"])
def test_every_farm_command_in_the_ci_files_parses_with_exactly_its_flags(path):
    lines = farm_lines(path)
    assert any(line.startswith("farm run ") for line in lines)
    assert any(line.startswith("farm approve ") for line in lines)
    for line in lines:
        parse_exactly(line)


def git(cwd: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True).stdout


def farm_as_written(line: str) -> int:
    return main(shlex.split(line)[1:])


@pytest.fixture
def origin(tmp_path, monkeypatch) -> Path:
    """A bare repository: main holds sample models, models.toml and their goldens (made with the
    bootstrap command a first run prints); branch `pr` changes crate.mdx."""
    if shutil.which("git") is None:
        pytest.skip("git is needed")
    for name in ("FARM_GOLDENS", "FARM_OUT", "FARM_BROKER_URL", "GITHUB_ACTIONS", "GITLAB_CI"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("GIT_AUTHOR_NAME", "ci")
    monkeypatch.setenv("GIT_AUTHOR_EMAIL", "ci@example.invalid")
    monkeypatch.setenv("GIT_COMMITTER_NAME", "ci")
    monkeypatch.setenv("GIT_COMMITTER_EMAIL", "ci@example.invalid")
    monkeypatch.setenv("FARM_USER", "reviewer")
    bare = tmp_path / "origin.git"
    git(tmp_path, "init", "-q", "--bare", "-b", "main", str(bare))
    seed = tmp_path / "seed"
    git(tmp_path, "clone", "-q", str(bare), str(seed))
    write_samples(seed / "all")
    (seed / "models").mkdir()
    shutil.copytree(seed / "all" / "Textures", seed / "models" / "Textures")
    for name in ("crate.mdx", "filter_modes.mdx"):
        shutil.copy(seed / "all" / name, seed / "models" / name)
    shutil.rmtree(seed / "all")
    (seed / "models.toml").write_text('name = "mods"\nsize = "32x32"\ntimestamps = [0]\nsequences = ["first"]\n'
                                      '[[models]]\npaths = ["models/*.mdx"]\n')
    (seed / ".gitignore").write_text("/farm-out/\n/farm-report/\n")
    monkeypatch.chdir(seed)
    assert main(["run", "models.toml", "--no-progress", "--workers", "1", "--update-goldens"]) == 0
    shutil.rmtree(seed / "farm-out")
    git(seed, "add", ".")
    git(seed, "commit", "-q", "-m", "models and their goldens")
    git(seed, "push", "-q", "origin", "main")
    git(seed, "checkout", "-q", "-b", "pr")
    crate = load_model(seed / "models" / "crate.mdx")
    for g in crate.geosets:
        g.vertices = g.vertices * 0.6
    save_model(crate, seed / "models" / "crate.mdx")
    git(seed, "commit", "-q", "-am", "crate: smaller")
    git(seed, "push", "-q", "origin", "pr")
    return bare


def test_the_pull_request_loop_runner_report_laptop_approve_green_rerun(origin, tmp_path, monkeypatch, capsys):
    workflow = yaml.safe_load(GITHUB.read_text())
    (job,) = workflow["jobs"].values()
    farm_run = next(s["run"] for s in job["steps"] if s.get("run", "").startswith("farm run"))
    runner, laptop = tmp_path / "runner", tmp_path / "laptop"
    git(tmp_path, "clone", "-q", "-b", "pr", str(origin), str(runner))
    git(tmp_path, "clone", "-q", "-b", "pr", str(origin), str(laptop))

    for name, value in {"GITHUB_ACTIONS": "true", "GITHUB_RUN_ID": "77", "GITHUB_REPOSITORY": "mods/units",
                        "GITHUB_JOB": "render"}.items():
        monkeypatch.setenv(name, value)
    monkeypatch.chdir(runner)
    capsys.readouterr()
    assert farm_as_written(farm_run) == 1  # crate changed: the check fails
    report = runner / parse_exactly(farm_run).report
    shutil.rmtree(runner / "farm-out")  # the runner is thrown away
    summary = (report / "summary.md").read_text()
    assert "farm-out" not in summary and str(runner) not in summary
    assert "gh run download 77 --name farm-report --dir farm-report" in summary
    (approve,) = [line.strip() for line in summary.splitlines() if line.strip().startswith("farm approve")]
    assert approve == "farm approve farm-report --failed"
    for name in ("GITHUB_ACTIONS", "GITHUB_RUN_ID", "GITHUB_REPOSITORY", "GITHUB_JOB"):
        monkeypatch.delenv(name)

    shutil.copytree(report, laptop / "farm-report")  # gh run download: the artifact, nothing else
    shutil.rmtree(report)
    monkeypatch.chdir(laptop)
    assert farm_as_written(approve) == 0
    rec = GoldenIndex.load(laptop / "goldens").log()[-1]
    assert rec["report"] == "farm-report" and rec["ci_run"].endswith("/mods/units/actions/runs/77")
    assert git(laptop, "status", "--porcelain", "--", "farm-report") == ""  # ignored, as the README says
    git(laptop, "add", "goldens")
    git(laptop, "commit", "-q", "-m", "goldens: the smaller crate")
    git(laptop, "push", "-q", "origin", "pr")

    monkeypatch.chdir(runner)
    git(runner, "pull", "-q", "--ff-only")
    capsys.readouterr()
    assert farm_as_written(farm_run) == 0
    assert "PASSED" in capsys.readouterr().out
