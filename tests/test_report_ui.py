"""Issue 16: the report's compact list and folded cards, blank-frame warnings, and `farm serve`'s
bulk decisions (API and headless Chromium), plus serve's robustness (NUL byte, short body, SIGTERM,
port taken)."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

import browser
import numpy as np
import pytest
from golden_runs import broken, image, key, make_run

from farm import goldens as G
from farm.cli import main
from farm.compare.runs import compare_run
from farm.goldens import GoldenIndex
from farm.images import blank_reason
from farm.report import write_report
from farm.serve import server as serve_mod
from farm.serve.server import ReportServer, make_server

ROOT = Path(__file__).resolve().parents[1]
K_PASS, K_FAIL, K_FAIL2 = key(t=0), key(t=500), key(t=900)
K_NEW, K_BLANK = key("models/b.mdx", "Walk", 0), key("models/b.mdx", "Walk", 300)
def needs_chromium(test):
    """A test in Chromium: skipped without it, and slow (a real browser process; not in make test-fast)."""
    return pytest.mark.slow(pytest.mark.skipif(browser.available() is not None, reason=browser.available() or "")(test))


def blank(size: int = 32) -> np.ndarray:
    return np.zeros((size, size, 4), np.uint8)


def test_blank_reason():
    assert blank_reason(blank()) == "fully transparent"
    grey = np.full((4, 4, 4), 80, np.uint8)
    grey[..., 3] = 255
    assert blank_reason(grey) == "every pixel is #505050ff"
    assert blank_reason(image(1)) is None


def test_approving_a_blank_frame_needs_allow_blank(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("FARM_USER", "ci")
    monkeypatch.chdir(tmp_path)
    run = make_run(tmp_path / "store", {K_NEW: image(3), K_BLANK: blank()})
    res = compare_run(run, tmp_path / "g")
    assert res["traces"][K_BLANK]["blank"] == "fully transparent" and res["traces"][K_NEW]["blank"] is None
    args = ["approve", run.id, "--all", "--out", str(tmp_path / "store"), "--goldens", str(tmp_path / "g")]
    assert main(args) == 0
    err = capsys.readouterr().err
    assert f"skipped: {K_BLANK}: the frame is blank (fully transparent)" in err and "--allow-blank" in err
    assert GoldenIndex.load(tmp_path / "g").traces() == {K_NEW}
    assert main([*args, "--allow-blank"]) == 0
    assert GoldenIndex.load(tmp_path / "g").traces() == {K_NEW, K_BLANK}


@pytest.fixture
def served(tmp_path):
    g = tmp_path / "goldens"
    base = make_run(tmp_path / "store", {K_PASS: image(1), K_FAIL: image(2), K_FAIL2: image(4)})
    G.approve(g, base, list(base.traces), by="setup")
    run = make_run(tmp_path / "store", {K_PASS: image(1), K_FAIL: broken(image(2)), K_FAIL2: broken(image(4)),
                                        K_NEW: image(3), K_BLANK: blank()})
    state = ReportServer(run, g, by="Bulk Tester")
    server = make_server(state, "127.0.0.1", 0)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    url = f"http://127.0.0.1:{server.server_address[1]}/"
    try:
        yield {"url": url, "state": state, "goldens": g, "run": run, "port": server.server_address[1]}
    finally:
        server.shutdown()
        server.server_close()
        state.close()


def post(url, data, token):
    req = urllib.request.Request(url, data=json.dumps(data).encode(), method="POST",
                                 headers={"Content-Type": "application/json", "X-Farm-Token": token})
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


def test_static_report_has_a_compact_list_and_folds_passed_cards(tmp_path):
    g = tmp_path / "g"
    base = make_run(tmp_path / "s", {K_PASS: image(1), K_FAIL: image(2)})
    G.approve(g, base, list(base.traces), by="x")
    run = make_run(tmp_path / "s", {K_PASS: image(1), K_FAIL: broken(image(2)), K_BLANK: blank()})
    write_report(compare_run(run, g), tmp_path / "r")
    html = (tmp_path / "r" / "index.html").read_text()
    rows = html.split('<table class="trace-list"')[1].split("</table>")[0]
    assert rows.count('<tr class="row') == 3 and 'class="badge blank"' in rows and "img/" in rows
    card = next(c for c in html.split("<section")[1:] if f'data-key="{K_PASS}"' in c)
    assert 'data-collapsed="1"' in card.split(">", 1)[0]
    card = next(c for c in html.split("<section")[1:] if f'data-key="{K_FAIL}"' in c)
    assert "data-collapsed" not in card.split(">", 1)[0]
    card = next(c for c in html.split("<section")[1:] if f'data-key="{K_BLANK}"' in c)
    assert "blank frame" in card and "--allow-blank" in card


def test_bulk_api_selected_and_all_failed(served):
    api, token = served["url"] + "api/", served["state"].token
    status, out = post(api + "bulk", {"action": "approve", "keys": [K_NEW, K_BLANK]}, token)
    assert status == 200 and out["ok"]
    assert "1 trace(s) approved" in out["message"] and "1 skipped" in out["message"] and "blank" in out["message"]
    assert out["statuses"][K_NEW] == ["pass", "passed"] and out["statuses"][K_BLANK][0] == "new"
    assert out["head"]["word"] == "FAILED" and ["fail", 2, "failed"] in out["head"]["counts"]
    status, out = post(api + "bulk", {"action": "approve", "keys": [K_BLANK], "allow_blank": True}, token)
    assert out["ok"] and out["statuses"][K_BLANK][0] == "pass"
    status, out = post(api + "bulk", {"action": "approve", "status": "fail"}, token)
    assert out["ok"] and "2 trace(s) approved" in out["message"]
    assert out["head"]["word"] == "PASSED" and out["head"]["failed_with_image"] == 0
    log = GoldenIndex.load(served["goldens"]).log()
    assert len(log[-1]["changes"]) == 2  # one decision for the whole selection
    assert post(api + "bulk", {"action": "delete", "keys": []}, token)[0] == 400
    assert post(api + "bulk", {"action": "approve", "keys": ["no|such"]}, token)[1]["ok"] is False


def test_serve_rejects_a_nul_byte_and_a_short_body(served, monkeypatch):
    with socket.create_connection(("127.0.0.1", served["port"]), timeout=10) as s:
        s.sendall(b"GET /%%00/index.html HTTP/1.1\r\nHost: 127.0.0.1:%d\r\n\r\n" % served["port"])
        assert s.recv(200).startswith(b"HTTP/1.1 400")
    monkeypatch.setattr(serve_mod, "READ_TIMEOUT", 0.5)
    # the handler class reads the timeout when the server is made: make one with the short timeout
    server = make_server(served["state"], "127.0.0.1", 0)
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
    try:
        port = server.server_address[1]
        with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
            s.sendall(b"POST /api/undo HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nContent-Type: application/json\r\n"
                      b"X-Farm-Token: %s\r\nContent-Length: 100\r\n\r\n{}" % (port, served["state"].token.encode()))
            t0 = time.monotonic()
            answer = b""
            while b"Content-Length" not in answer or not answer.endswith(b"}"):
                chunk = s.recv(500)
                if not chunk:
                    break
                answer += chunk
            assert answer.startswith(b"HTTP/1.1 400") and b"shorter than its Content-Length" in answer
            assert time.monotonic() - t0 < 5
    finally:
        server.shutdown()
        server.server_close()


def _serve_proc(tmp_path, run, port="0"):
    env = {**os.environ, "PYTHONPATH": str(ROOT), "FARM_USER": "cli", "TMPDIR": str(tmp_path / "tmp")}
    (tmp_path / "tmp").mkdir(exist_ok=True)
    return subprocess.Popen([sys.executable, "-m", "farm.cli", "serve", run.id, "--out", str(tmp_path / "store"),
                             "--goldens", str(tmp_path / "goldens"), "--port", port],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env, cwd=tmp_path)


def test_serve_cleans_its_temp_folder_on_sigterm_and_when_the_port_is_taken(tmp_path):
    run = make_run(tmp_path / "store", {K_NEW: image(3)})
    proc = _serve_proc(tmp_path, run)
    try:
        line = proc.stdout.readline()
        assert "http://127.0.0.1:" in line, line
        assert list((tmp_path / "tmp").glob("farm-serve-*"))
        port = line.split("127.0.0.1:", 1)[1].split("/")[0]
        taken = _serve_proc(tmp_path, run, port)  # the same port: cannot bind
        out = taken.communicate(timeout=60)[0]
        assert taken.returncode == 2 and "cannot serve" in out, out
        assert len(list((tmp_path / "tmp").glob("farm-serve-*"))) == 1  # only the first server's
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(30) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
    assert not list((tmp_path / "tmp").glob("farm-serve-*"))


@needs_chromium
def test_chromium_compact_list_opens_cards_and_bulk_approves(served):
    with browser.Browser() as b:
        b.get(served["url"])
        b.wait_for("return document.body.dataset.ready === '1'")
        card = 'section.trace[data-key="{}"]'.format
        row = '#trace-list tr.row[data-key="{}"]'.format
        collapsed = "return document.querySelector(arguments[0]).dataset.collapsed === '1'"
        content_hidden = ("return getComputedStyle(document.querySelector(arguments[0] + ' .views')).display"
                          " === 'none'")
        assert b.run("return document.querySelectorAll('#trace-list tr.row').length") == 5
        assert b.run(collapsed, card(K_PASS)) and b.run(content_hidden, card(K_PASS))
        assert not b.run(collapsed, card(K_FAIL))
        # a click on a passed trace's row opens its card
        b.click(b.find(row(K_PASS) + " td.key"))
        b.wait_for("return document.querySelector(arguments[0]).dataset.collapsed === undefined", card(K_PASS))
        assert not b.run(content_hidden, card(K_PASS))
        assert b.run("return document.querySelector(arguments[0]).classList.contains('focused')", card(K_PASS))
        # the card's own toggle folds it again
        b.click(b.find(card(K_PASS) + " button.toggle"))
        assert b.run(collapsed, card(K_PASS))
        # blank badge in the list
        assert b.run("return document.querySelector(arguments[0] + ' .badge.blank') !== null", row(K_BLANK))
        # select all failed, approve the selection: statuses and counts refresh without a reload
        assert b.run("return document.getElementById('failed-count').textContent") == "2"
        b.click(b.find("#select-failed"))
        assert b.run("return document.getElementById('selected-count').textContent") == "2 selected"
        b.click(b.find("#bulk-approve"))
        b.wait_for("return document.getElementById('bulk-result').textContent.includes('2 trace(s) approved')")
        assert b.run("return document.querySelector(arguments[0]).dataset.status", row(K_FAIL)) == "pass"
        assert b.run("return document.querySelector(arguments[0]).dataset.status", card(K_FAIL2)) == "pass"
        assert b.run("return document.getElementById('failed-count').textContent") == "0"
        counts = b.run("return document.getElementById('counts').textContent")
        assert counts == "2 new, 3 passed", counts
        assert b.run("return document.getElementById('selected-count').textContent") == "0 selected"
        # the new trace by its checkbox, the blank one needs the box that allows it
        b.click(b.find(row(K_NEW) + " input.select"))
        b.click(b.find(row(K_BLANK) + " input.select"))
        b.click(b.find("#bulk-approve"))
        b.wait_for("return document.getElementById('bulk-result').textContent.includes('1 skipped')")
        assert b.run("return document.querySelector(arguments[0]).dataset.status", row(K_BLANK)) == "new"
        b.click(b.find("#allow-blank"))
        b.click(b.find(row(K_BLANK) + " input.select"))
        b.click(b.find("#bulk-approve"))
        b.wait_for("return document.querySelector(arguments[0]).dataset.status === 'pass'", row(K_BLANK))
        assert b.run("return document.getElementById('verdict-word').textContent") == "PASSED"
        assert GoldenIndex.load(served["goldens"]).traces() == {K_PASS, K_FAIL, K_FAIL2, K_NEW, K_BLANK}
        assert b.severe_logs() == []
