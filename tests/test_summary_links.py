"""Issue 24 item 8: summary.md works once posted. Without an absolute --image-base it has no image
links (relative img/... links break in a pull-request comment) and says, once in the file and once
on the terminal, how to get them; with one every image link is absolute; a relative (or non-http)
--image-base is refused with one sentence, on every command that takes it and in farm.toml."""

from __future__ import annotations

import re

import pytest
from golden_runs import broken, image, key, make_run

from farm import goldens as G
from farm.cli import main
from farm.report.images import image_relpath

PASS, FAIL = key("models/crate.mdx", "Stand", 0), key("models/crate.mdx", "Walk", 250)
NEW = key("units/footman.mdx", "Attack", 0)
HINT = "pass `--image-base URL`"


@pytest.fixture
def run(tmp_path, monkeypatch):
    """A run with a failed, a new and a passed trace, its goldens; cwd without a farm.toml."""
    monkeypatch.chdir(tmp_path)
    for var in ("FARM_OUT", "FARM_GOLDENS", "FARM_BROKER_URL"):
        monkeypatch.delenv(var, raising=False)
    base = make_run(tmp_path / "store", {PASS: image(1), FAIL: image(2)})
    G.approve(tmp_path / "goldens", base, list(base.traces), by="ci")
    job = make_run(tmp_path / "store", {PASS: image(1), FAIL: broken(image(2)), NEW: image(3)})
    return job, tmp_path


def image_links(md: str) -> list[str]:
    """Every image or link target in the Markdown: <img src=...>, ![..](..), [..](..)."""
    return re.findall(r'src="([^"]*)"', md) + re.findall(r"\]\(([^)]*)\)", md)


def compare(job, tmp, *extra) -> int:
    return main(["compare", job.id, "--out", str(tmp / "store"), "--goldens", str(tmp / "goldens"),
                 "-o", str(tmp / "r"), *extra])


def test_without_image_base_no_relative_links_and_one_hint(run, capsys):
    job, tmp = run
    assert compare(job, tmp) == 1  # the failed trace
    printed = capsys.readouterr()
    md = (tmp / "r" / "summary.md").read_text()
    assert (tmp / "r" / "img").is_dir() and any((tmp / "r" / "img").iterdir())  # the HTML report has its images
    assert "](img/" not in md and 'src="img/' not in md and "<img" not in md
    assert image_links(md) == []  # nothing relative, nothing at all to break
    assert md.count(HINT) == 1
    assert "### Worst differences (1 of 1)" in md and "| trace | status | SSIM | pixels over | max diff |\n" in md
    for line in md.splitlines():
        if line.startswith("| <code>"):  # rows have as many cells as their header (no empty image cells)
            assert line.count("|") in (3, 6), line
    # the terminal says it once, on stderr (stdout stays the summary, or JSON with --json)
    assert printed.err.count(HINT) == 1 and HINT not in printed.out
    assert str(tmp / "r" / "summary.md") in printed.err


def test_with_absolute_image_base_every_link_is_absolute(run, capsys):
    job, tmp = run
    assert compare(job, tmp, "--image-base", "https://ci.example/r/") == 1
    printed = capsys.readouterr()
    md = (tmp / "r" / "summary.md").read_text()
    assert f'<img src="https://ci.example/r/{image_relpath(job.traces[FAIL]["digest"])}" width="96" alt="new">' in md
    assert "**[Full report](https://ci.example/r/index.html)**" in md
    links = image_links(md)
    assert len(links) >= 5 and all(u.startswith("https://ci.example/r/") for u in links), links
    assert HINT not in md and HINT not in printed.err


@pytest.mark.parametrize("base", ["img/", "report/img", "/srv/report/", "file:///srv/report/", "ftp://ci/r/",
                                  "https:/ci/r"])
def test_relative_image_base_is_refused_in_one_sentence(run, capsys, base):
    job, tmp = run
    with pytest.raises(SystemExit) as e:
        compare(job, tmp, "--image-base", base)
    assert e.value.code == 2
    err = capsys.readouterr().err
    (line,) = [ln for ln in err.splitlines() if "error:" in ln]
    assert "--image-base must be an absolute http(s) URL" in line and repr(base) in line
    assert not (tmp / "r").exists()  # refused before anything was written


@pytest.mark.parametrize("argv", [
    ["report", "latest", "-o", "r"],
    ["diff", "latest", "latest", "-o", "r"],
    ["run", "job.toml"],
    ["nightly", "run-now", "--manifest", "job.toml"],
])
def test_every_command_with_image_base_refuses_a_relative_one(run, capsys, argv):
    with pytest.raises(SystemExit) as e:
        main([*argv, "--image-base", "img/"])
    assert e.value.code == 2
    assert "--image-base must be an absolute http(s) URL" in capsys.readouterr().err


def test_farm_toml_image_base_is_checked(run, capsys):
    job, tmp = run
    (tmp / "farm.toml").write_text('[defaults]\nimage_base = "img/"\n')
    assert main(["status", job.id, "--out", str(tmp / "store")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and str(tmp / "farm.toml") in err and "[defaults] image_base" in err
    assert "must be an absolute http(s) URL" in err
    (tmp / "farm.toml").write_text('[defaults]\nimage_base = "https://ci.example/r/"\n')
    assert compare(job, tmp) == 1
    assert 'src="https://ci.example/r/img/' in (tmp / "r" / "summary.md").read_text()


def test_farm_run_and_nightly_pass_the_image_base_on(tmp_path, monkeypatch, capsys):
    """`farm run -o` and `farm nightly run-now` write summary.md with absolute links under
    --image-base (the night's under URL/DATE/), and without it the hint, said once on stderr."""
    from renderer.samples import write_samples

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("FARM_RENDERER", "synthetic")  # the no-GL stand-in: this is about the links
    for var in ("FARM_OUT", "FARM_GOLDENS", "FARM_BROKER_URL", "FARM_NIGHTLY_MANIFEST", "FARM_NIGHTLY_REPORTS"):
        monkeypatch.delenv(var, raising=False)
    write_samples(tmp_path / "models")
    (tmp_path / "job.toml").write_text('size = "16x16"\nsequences = ["Stand"]\ntimestamps = [0]\n'
                                       'models = ["models/crate.mdx"]\n')
    (tmp_path / "goldens").mkdir()
    (tmp_path / "goldens" / "index.jsonl").write_text('{"format": "modelfarm.goldens/1"}\n')
    run = ["run", "job.toml", "--out", "store", "--workers", "1", "--no-progress", "-o", "r"]
    assert main([*run, "--image-base", "https://ci.example/r/"]) == 1  # a new trace fails the run
    md = (tmp_path / "r" / "summary.md").read_text()
    assert 'src="https://ci.example/r/img/' in md and HINT not in md
    assert HINT not in capsys.readouterr().err
    assert main(run) == 1
    assert capsys.readouterr().err.count(HINT) == 1
    md = (tmp_path / "r" / "summary.md").read_text()
    assert "<img" not in md and image_links(md) == [] and md.count(HINT) == 1

    night = ["nightly", "run-now", "--manifest", "job.toml", "--reports", "nightly", "--out", "store",
             "--workers", "1"]
    assert main([*night, "--image-base", "https://ci.example/nightly"]) == 1
    (day,) = [p for p in (tmp_path / "nightly").iterdir() if p.is_dir()]
    md = (day / "summary.md").read_text()
    assert f'src="https://ci.example/nightly/{day.name}/img/' in md
    assert f"[Full report](https://ci.example/nightly/{day.name}/index.html)" in md
