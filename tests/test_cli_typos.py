"""A typo on the command line gets the nearest option or command, from the command's own parser."""

from __future__ import annotations

import subprocess
import sys

import pytest
from conftest import ROOT

from farm.cli import main


@pytest.mark.parametrize(("argv", "said", "hint"), [
    (["render", "m.mdx", "-o", "x.png", "--seqence", "Walk"], "unrecognized arguments: --seqence Walk",
     "did you mean --sequence?"),
    (["thumbnails", "maps", "-o", "t", "--workrs", "2"], "unrecognized arguments: --workrs 2",
     "did you mean --workers?"),
    (["approve", "latest", "--faild"], "unrecognized arguments: --faild", "did you mean --failed?"),
    (["render", "m.mdx", "--missing-textures", "chcker"], "invalid choice: 'chcker'", "did you mean checker?"),
    (["rendr", "m.mdx"], "invalid choice: 'rendr'", "did you mean render?"),
])
def test_the_nearest_option_or_command_is_named(argv, said, hint, capsys):
    with pytest.raises(SystemExit) as exit_:
        main(argv)
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert said in err and hint in err, err
    if argv[0] != "rendr":  # the command's own usage line, not the top-level one
        assert err.startswith(f"usage: farm {argv[0]} "), err


def test_nothing_close_gets_no_guess(capsys):
    with pytest.raises(SystemExit):
        main(["render", "m.mdx", "-o", "x.png", "--zzzzzz"])
    err = capsys.readouterr().err
    assert "unrecognized arguments: --zzzzzz" in err and "did you mean" not in err


def test_the_installed_command_says_it_in_one_line():
    argv = [sys.executable, "-m", "farm.cli", "render", "m.mdx", "-o", "x.png", "--seqence", "Walk"]
    r = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert r.stderr.strip().splitlines()[-1] == (
        "farm render: error: unrecognized arguments: --seqence Walk (did you mean --sequence?)")
