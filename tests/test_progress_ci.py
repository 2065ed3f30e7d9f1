"""Issue 16: progress in CI (plain lines every few seconds when the output is not a terminal) and
logging (-v/-q, each warning once)."""

from __future__ import annotations

import io
import logging
import time

from farm.run.progress import OnceFilter, Progress, configure_logging, progress_line


def test_progress_line_says_done_failed_rate_and_eta():
    assert progress_line(120, 3, 500, 10.0) == "progress: 120/500 frames (24%), 3 failed, 12.0 frames/s, ETA 32s"
    assert progress_line(0, 0, 10, 1.0).endswith("ETA unknown")
    assert progress_line(10, 0, 10, 2.0).endswith("5.0 frames/s, done")
    assert "ETA 2m05s" in progress_line(10, 0, 260, 5.0)


def test_lines_every_few_seconds_when_not_a_terminal():
    out = io.StringIO()  # not a terminal
    p = Progress(20, file=out, every=0.1)
    p.update("b1", 5, 1)
    time.sleep(0.35)
    p.finish("b1", 20, 2)
    p.close()
    lines = out.getvalue().splitlines()
    assert len(lines) >= 3 and all(ln.startswith("progress: ") for ln in lines)
    assert "progress: 5/20 frames (25%), 1 failed" in lines[0]
    assert lines[-1].startswith("progress: 20/20 frames (100%), 2 failed") and lines[-1].endswith("done")


def test_no_lines_when_disabled():
    out = io.StringIO()
    p = Progress(5, enabled=False, file=out, every=0.05)
    p.finish("b", 5)
    time.sleep(0.1)
    p.close()
    assert out.getvalue() == ""


def test_each_warning_once_and_verbosity():
    err = io.StringIO()
    log = configure_logging(0, False, stream=err)
    child = logging.getLogger("farm.run.local")
    for _ in range(3):
        child.warning("a worker process died; %d batch(es) run again", 2)
    child.info("hidden at the default level")
    child.warning("another warning")
    assert err.getvalue().count("a worker process died; 2 batch(es) run again") == 1
    assert "another warning" in err.getvalue() and "hidden" not in err.getvalue()
    assert log.level == logging.WARNING
    assert configure_logging(1, False, stream=err).level == logging.INFO
    assert configure_logging(2, False, stream=err).level == logging.DEBUG
    assert configure_logging(0, True, stream=err).level == logging.ERROR
    f = OnceFilter()
    rec = logging.LogRecord("farm", logging.INFO, "", 0, "info %s", ("x",), None)
    assert f.filter(rec) and f.filter(rec)  # only warnings are deduplicated


def test_cli_quiet_and_verbose_flags(tmp_path, monkeypatch, capsys):
    from farm.cli import build_parser, main

    args = build_parser().parse_args(["run", "x.toml", "-q"])
    assert args.quiet and args.verbose == 0
    assert build_parser().parse_args(["compare", "latest", "-vv"]).verbose == 2
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("FARM_OUT", raising=False)
    assert main(["status", "nope", "-q"]) == 2
    configure_logging()
