"""Issue 32, item 4: one bootstrap hint, whatever says where the goldens are.

A first run of real models (one drawing placeholders for a missing texture, one drawing nothing)
prints one command, and no other approve command, whether the goldens go next to the manifest,
to `--goldens DIR` (missing or existing and empty) or to farm.toml's `goldens`; that command, run
exactly as printed, makes every rendered trace a golden (naming --allow-missing and --allow-blank
and why, once) and the rerun passes. A model that does not load is the one exception, and the hint
says so. Real EGL renders through the command line."""

from __future__ import annotations

import os
import re
import shlex
import shutil
from pathlib import Path

import pytest

os.environ.setdefault("EGL_PLATFORM", "surfaceless")
os.environ.setdefault("PYOPENGL_PLATFORM", "egl")

from farm.cli import main  # noqa: E402
from farm.goldens import GoldenIndex  # noqa: E402
from renderer.formats import load_model, save_model  # noqa: E402
from renderer.samples import write_samples  # noqa: E402

RUN = ["--out", "out", "--workers", "1", "--no-progress"]


@pytest.fixture
def suite(tmp_path, monkeypatch) -> Path:
    for name in ("FARM_GOLDENS", "FARM_OUT", "FARM_BROKER_URL"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("FARM_USER", "ci-bot")
    monkeypatch.chdir(tmp_path)
    write_samples(tmp_path / "all")
    models = tmp_path / "mods" / "models"
    models.mkdir(parents=True)
    shutil.copytree(tmp_path / "all" / "Textures", models / "Textures")
    (models / "Textures" / "Crate.tga").unlink()
    for name in ("crate.mdx", "filter_modes.mdx"):
        shutil.copy(tmp_path / "all" / name, models / name)
    empty = load_model(models / "filter_modes.mdx")
    for g in empty.geosets:
        g.vertices = g.vertices * 0.0
    save_model(empty, models / "empty.mdx")
    (tmp_path / "mods" / "job.toml").write_text('name = "s"\nsize = "16x16"\ntimestamps = [0]\n'
                                                'sequences = ["first"]\n[[models]]\npaths = ["models/*.mdx"]\n')
    return tmp_path


def first_run(capsys, *extra: str) -> tuple[int, str]:
    capsys.readouterr()
    code = main(["run", "mods/job.toml", *RUN, *extra])
    captured = capsys.readouterr()
    return code, captured.out + captured.err


def the_command(output: str) -> str:
    """The one command the output names: `farm run ... --update-goldens...` (no `farm approve` besides)."""
    assert "farm approve" not in output
    commands = re.findall(r"(farm run [^\n(]*?--update-goldens[^\n(]*?)(?= \(|\n|$)", output)
    assert len(commands) == 1, output
    assert commands[0].startswith("farm run mods/job.toml --update-goldens=new"), commands
    return commands[0]


WHERE = {"next to the manifest": ([], "mods/goldens"), "--goldens DIR missing": (["--goldens", "g/new"], "g/new"),
         "--goldens DIR existing": (["--goldens", "g/empty"], "g/empty"), "farm.toml": ([], "fromtoml")}


@pytest.mark.parametrize("where", list(WHERE))
def test_the_one_printed_command_makes_every_trace_a_golden_and_the_rerun_passes(suite, capsys, where):
    extra, folder = WHERE[where]
    if where == "--goldens DIR existing":
        (suite / folder).mkdir(parents=True)
    if where == "farm.toml":
        (suite / "farm.toml").write_text(f'goldens = "{folder}"\n')
    code, out = first_run(capsys, *extra)
    assert code == (0 if where == "next to the manifest" else 1)  # rendered, not compared; or all new
    command = the_command(out)
    assert command.endswith("--allow-missing --allow-blank")
    assert out.count("drew placeholders for missing assets and 1 frame came out blank") == 1
    capsys.readouterr()
    assert main(shlex.split(command)[1:] + RUN) == 0
    index = GoldenIndex.load(suite / folder)
    assert len(index.traces()) == 3
    code, out = first_run(capsys, *extra)
    assert code == 0 and "PASSED: 3 pass of 3 traces" in out


def test_a_model_that_does_not_load_is_the_one_exception_and_is_named(suite, capsys):
    (suite / "mods" / "models" / "broken.mdx").write_bytes(bytes(range(256)) * 2)
    code, out = first_run(capsys, "--goldens", "g")
    command = the_command(out)
    assert "models/broken.mdx: fix them, the rerun fails until then" in out
    capsys.readouterr()
    main(shlex.split(command)[1:] + RUN)
    assert len(GoldenIndex.load(suite / "g").traces()) == 3
    code, out = first_run(capsys, "--goldens", "g")
    assert code == 1 and "3 pass" in out and "1 error" in out
