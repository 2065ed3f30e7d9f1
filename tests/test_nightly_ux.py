"""Issue 16: `farm nightly run-now`, the beat command with its schedule file in the state folder,
the index page over dated reports with the pass/fail trend, and the notification hook (a command
that writes a file; a webhook on a local http.server). No GL: the night's run is made by hand."""

from __future__ import annotations

import datetime as dt
import json
import os
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, HTTPServer

import pytest
from golden_runs import broken, image, key, make_run

from farm import goldens as G
from farm.cli import main
from farm.flows.nightly import notify, read_history, run_nightly

K1, K2 = key(t=0), key(t=500)


@pytest.fixture
def night(tmp_path, monkeypatch):
    """A manifest with goldens; each run_job returns the next hand-made run."""
    for name in ("FARM_OUT", "FARM_GOLDENS", "FARM_BROKER_URL", "FARM_NIGHTLY_MANIFEST", "FARM_NIGHTLY_NOTIFY",
                 "FARM_NIGHTLY_REPORTS", "FARM_NIGHTLY_STATE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.chdir(tmp_path)
    manifest = tmp_path / "nightly.toml"
    manifest.write_text('name = "nightly"\n')
    base = make_run(tmp_path / "store", {K1: image(1), K2: image(2)})
    G.approve(tmp_path / "goldens", base, list(base.traces), by="setup")
    frames = []

    def run_job(m, out=None, job_id=None, **kw):
        job = make_run(out, frames.pop(0), job_id=job_id)
        job.data["manifest"] = str(manifest)
        job.save(force=True)
        return job

    monkeypatch.setattr("farm.flows.nightly.run_job", run_job)
    return {"manifest": manifest, "frames": frames, "reports": tmp_path / "reports", "store": tmp_path / "store"}


def test_index_page_with_trend(night):
    day = dt.datetime(2026, 5, 1, 2, 0, tzinfo=dt.UTC)
    for i, frames in enumerate([{K1: image(1), K2: image(2)}, {K1: image(1), K2: broken(image(2))},
                                {K1: image(1), K2: image(2)}, {K1: image(1), K2: image(2)}]):
        night["frames"].append(frames)
        run_nightly(night["manifest"], reports=night["reports"], out=night["store"], now=day + dt.timedelta(days=i))
    html = (night["reports"] / "index.html").read_text()
    assert [h["status"] for h in read_history(night["reports"])] == ["pass", "fail", "pass", "pass"]
    assert html.index('data-date="2026-05-04"') < html.index('data-date="2026-05-01"')  # newest first
    assert "Passed 3 of the last 4 night(s)" in html and "2 pass night(s) in a row" in html
    trend = html.split('id="trend"')[1].split("</div>")[0]
    assert [c.split('"')[1] for c in trend.split('<a class=')[1:]] == ["pass", "fail", "pass", "pass"]
    assert 'href="2026-05-02/index.html"' in html


def test_run_now_with_a_notify_command_that_writes_a_file(night, capsys, tmp_path):
    night["frames"].append({K1: image(1), K2: broken(image(2))})
    out = tmp_path / "notified.txt"
    script = ("import os, sys; open(sys.argv[1], 'w').write(os.environ['FARM_NIGHTLY_STATUS'] + '\\n'"
              " + os.environ['FARM_NIGHTLY_REPORT'] + '\\n' + sys.stdin.read())")
    cmd = f"{sys.executable} -c \"{script}\" {out}"
    code = main(["nightly", "run-now", "--manifest", str(night["manifest"]), "--reports", str(night["reports"]),
                 "--out", str(night["store"]), "--notify", cmd])
    assert code == 1
    printed = capsys.readouterr().out
    assert "nightly " in printed and ": fail" in printed and "notified " in printed and "ok" in printed
    status, report, *summary = out.read_text().splitlines()
    assert status == "fail" and report.endswith("/index.html") and report.startswith(str(night["reports"]))
    assert summary[0].startswith("## modelfarm") and "| fail | 1 |" in summary
    assert json.loads((night["reports"] / "status.json").read_text())["notify"]["ok"] is True
    assert (night["reports"] / "index.html").is_file()


def test_webhook_on_a_local_http_server(night, tmp_path):
    got = []

    class Hook(BaseHTTPRequestHandler):
        def do_POST(self):  # noqa: N802
            got.append(json.loads(self.rfile.read(int(self.headers["Content-Length"]))))
            self.send_response(204)
            self.end_headers()

        def log_message(self, *a):
            pass

    server = HTTPServer(("127.0.0.1", 0), Hook)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        night["frames"].append({K1: image(1), K2: image(2)})
        url = f"http://127.0.0.1:{server.server_address[1]}/hook"
        status = run_nightly(night["manifest"], reports=night["reports"], out=night["store"], notify_to=url,
                             now=dt.datetime(2026, 6, 1, 2, 0, tzinfo=dt.UTC))
    finally:
        server.shutdown()
        server.server_close()
    assert status["status"] == "pass" and status["notify"] == {"target": url, "ok": True, "detail": "HTTP 204"}
    assert got[0]["status"] == "pass" and got[0]["summary"].startswith("## modelfarm")
    # a hook that is down is noted, never fails the night
    night["frames"].append({K1: image(1), K2: image(2)})
    status = run_nightly(night["manifest"], reports=night["reports"], out=night["store"], notify_to=url,
                         now=dt.datetime(2026, 6, 2, 2, 0, tzinfo=dt.UTC))
    assert status["status"] == "pass" and status["notify"]["ok"] is False


def test_a_torn_history_line_is_cut_off_by_the_next_night(night):
    """A night killed while appending to history.jsonl leaves part of a line; the next night's line is whole
    and starts on a line of its own, and the history reads both whole nights."""
    day = dt.datetime(2026, 5, 1, 2, 0, tzinfo=dt.UTC)
    night["frames"].append({K1: image(1), K2: image(2)})
    run_nightly(night["manifest"], reports=night["reports"], out=night["store"], now=day)
    history = night["reports"] / "history.jsonl"
    with open(history, "ab") as f:
        f.write(b'{"date": "2026-05-02", "sta')  # the kill
    night["frames"].append({K1: image(1), K2: broken(image(2))})
    run_nightly(night["manifest"], reports=night["reports"], out=night["store"], now=day + dt.timedelta(days=2))
    lines = history.read_bytes().split(b"\n")
    assert lines[-1] == b"" and [json.loads(x)["date"] for x in lines[:-1]] == ["2026-05-01", "2026-05-03"]
    assert [h["status"] for h in read_history(night["reports"])] == ["pass", "fail"]


def test_notify_is_a_shell_line_with_pipes_and_redirections(night, tmp_path):
    """--notify 'cmd | cmd > file' runs as the user wrote it (a shell line), the summary on stdin."""
    night["frames"].append({K1: image(1), K2: image(2)})
    out = tmp_path / "lines.txt"
    status = run_nightly(night["manifest"], reports=night["reports"], out=night["store"],
                         notify_to=f"grep -c . | tr -d ' ' > '{out}' && test -n \"$FARM_NIGHTLY_REPORT\"")
    assert status["notify"]["ok"] is True, status["notify"]
    summary = (night["reports"] / status["date"] / "summary.md").read_text()
    assert int(out.read_text()) == sum(1 for ln in summary.splitlines() if ln)


def test_a_notify_line_that_hangs_is_stopped_with_its_children(night, tmp_path):
    night["frames"].append({K1: image(1), K2: image(2)})
    pids = tmp_path / "pids"
    got = notify(f"sleep 60 & echo $! > '{pids}'; wait", {"status": "pass", "date": "2026-06-01"}, "s", None,
                 timeout=1)
    assert got["ok"] is False and "still running after 1 s" in got["detail"]
    child = int(pids.read_text())
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        try:
            os.kill(child, 0)
        except ProcessLookupError:
            break
        time.sleep(0.05)
    else:
        pytest.fail("the notify line's child (sleep) outlived its timeout")


def test_beat_command_prints_broker_beat_and_worker_lines(night, capsys, monkeypatch, tmp_path):
    monkeypatch.setenv("FARM_NIGHTLY_REPORTS", str(tmp_path / "rep"))
    monkeypatch.delenv("FARM_BROKER_URL", raising=False)
    monkeypatch.delenv("FARM_QUEUE", raising=False)
    assert main(["nightly", "beat-command", "--manifest", str(night["manifest"]),
                 "--broker", "redis://10.0.0.5:6379/2"]) == 0
    broker, beat, worker = capsys.readouterr().out.strip().splitlines()
    assert broker == "export FARM_BROKER_URL=redis://10.0.0.5:6379/2"
    assert f"--schedule {tmp_path / 'rep' / 'state' / 'celerybeat-schedule'}" in beat
    assert "celery -A farm.celery beat" in beat and (tmp_path / "rep" / "state").is_dir()
    assert worker.startswith("celery -A farm.celery worker -Q farm,farm-nightly ")
    monkeypatch.setenv("FARM_NIGHTLY_STATE", str(tmp_path / "st"))
    monkeypatch.setenv("FARM_BROKER_URL", "redis://127.0.0.1:6379/3")
    monkeypatch.setenv("FARM_QUEUE", "render")
    assert main(["nightly", "beat-command", "--manifest", str(night["manifest"])]) == 0
    out = capsys.readouterr().out
    assert f"--schedule {tmp_path / 'st' / 'celerybeat-schedule'}" in out
    assert "FARM_BROKER_URL=redis://127.0.0.1:6379/3" in out and "-Q render,farm-nightly" in out
    monkeypatch.delenv("FARM_BROKER_URL")
    monkeypatch.chdir(tmp_path)  # no farm.toml above: no broker anywhere
    assert main(["nightly", "beat-command", "--manifest", str(night["manifest"])]) == 2
    assert "need a broker: pass --broker" in capsys.readouterr().err
    monkeypatch.delenv("FARM_NIGHTLY_MANIFEST", raising=False)
    assert main(["nightly", "run-now"]) == 2
    assert "pass --manifest FILE or set FARM_NIGHTLY_MANIFEST" in capsys.readouterr().err
