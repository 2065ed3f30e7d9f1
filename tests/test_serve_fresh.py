"""`farm serve` is never stale and checks where a POST comes from (issue 32 item 5): after a decision
in the page every count, filter label and problem line is current; a decision made in a terminal
shows on the next page load, in the page's poll (a banner saying so) and in the next decision; a POST
from another origin is refused, token or not."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import threading
import time
from pathlib import Path

import browser
import pytest
from golden_runs import broken, image, key, make_run
from test_serve import request  # the same JSON request helper

from farm import goldens as G
from farm.goldens import GoldenIndex
from farm.serve.server import ReportServer, make_server

ROOT = Path(__file__).resolve().parents[1]
FAILS = [key(t=t) for t in (0, 100, 200, 300)]
K_PASS = key("models/b.mdx", "Walk", 0)


@pytest.fixture
def served(tmp_path):
    """Four traces that differ from their goldens and one that passes."""
    g = tmp_path / "goldens"
    base = make_run(tmp_path / "store", {**{k: image(i) for i, k in enumerate(FAILS)}, K_PASS: image(7)})
    G.approve(g, base, list(base.traces), by="setup")
    run = make_run(tmp_path / "store", {**{k: broken(image(i)) for i, k in enumerate(FAILS)}, K_PASS: image(7)})
    state = ReportServer(run, g, by="Fresh Tester")
    server = make_server(state, "127.0.0.1", 0)
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
    port = server.server_address[1]
    try:
        yield {"url": f"http://127.0.0.1:{port}/", "port": port, "state": state, "goldens": g, "run": run,
               "store": tmp_path / "store"}
    finally:
        server.shutdown()
        server.server_close()
        state.close()


def post(served, path, data, **headers):
    status, body = request(served["url"] + path, data, {"X-Farm-Token": served["state"].token, **headers})
    return status, json.loads(body)


def terminal_undo(served, decision: int) -> str:
    """`farm approve --undo N --yes` in another process, as a reviewer's terminal would run it."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "FARM_USER": "terminal"}
    done = subprocess.run([sys.executable, "-m", "farm.cli", "approve", "--undo", str(decision), "--yes",
                           "--goldens", str(served["goldens"])], capture_output=True, text=True, env=env,
                          timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def test_a_post_from_another_origin_is_refused_token_or_not(served):
    own = f"http://127.0.0.1:{served['port']}"
    index_before = GoldenIndex.load(served["goldens"]).digest()
    for headers in ({"Origin": "http://evil.example"}, {"Origin": "null"},
                    {"Origin": f"http://127.0.0.1:{served['port'] + 1}"},
                    {"Referer": "http://evil.example/page.html"}, {"Sec-Fetch-Site": "cross-site"},
                    {"Origin": own, "Sec-Fetch-Site": "same-site"}, {"Origin": "file://"}):
        status, out = post(served, "api/bulk", {"action": "approve", "status": "fail"}, **headers)
        assert status == 403 and "another origin" in out["message"], (headers, out)
    assert GoldenIndex.load(served["goldens"]).digest() == index_before  # nothing written
    status, out = post(served, "api/approve", {"key": FAILS[0]}, Origin=own, Referer=own + "/index.html",
                       **{"Sec-Fetch-Site": "same-origin"})
    assert status == 200 and out["ok"], out
    status, out = post(served, "api/approve", {"key": FAILS[1]}, Origin=f"http://localhost:{served['port']}",
                       Host=f"localhost:{served['port']}")
    assert status == 200 and out["ok"], out


def test_after_approve_all_failed_every_header_part_is_current(served):
    status, out = post(served, "api/bulk", {"action": "approve", "status": "fail"})
    assert status == 200 and "4 trace(s) approved" in out["message"]
    head = out["head"]
    assert head["word"] == "PASSED" and head["problems"] == [] and head["commands"] == []
    assert head["counts"] == [["pass", 5, "passed"]] and head["failed_with_image"] == 0
    html = request(served["url"])[1].decode()
    labels = re.findall(r'class="filter-label">([^<]*)<', html)
    assert "differ from their goldens" not in html and labels == ["passed (5)"], labels


def test_a_decision_made_in_a_terminal_shows_in_the_page_and_the_next_decision(served):
    status, out = post(served, "api/bulk", {"action": "approve", "status": "fail"})
    assert "undid approve" in terminal_undo(served, out["log_id"])
    # the next decision acts on the traces failed now (was: "no trace is failed: nothing to do")
    status, out = post(served, "api/bulk", {"action": "approve", "status": "fail"})
    assert status == 200 and "4 trace(s) approved" in out["message"], out
    assert sorted(out["elsewhere"]) == sorted(FAILS) and out["head"]["word"] == "PASSED"
    page_digest = out["digest"]
    assert page_digest == GoldenIndex.load(served["goldens"]).digest()
    assert "undid approve" in terminal_undo(served, out["log_id"])
    # the page's poll: the new digest, the traces changed and the header as it is now
    status, state = request(served["url"] + "api/state")
    state = json.loads(state)
    assert status == 200 and state["digest"] != page_digest and sorted(state["changed"]) == sorted(FAILS)
    assert all(state["statuses"][k][0] == "fail" for k in FAILS)
    assert ["fail", 4, "failed"] in state["head"]["counts"] and state["head"]["failed_with_image"] == 4
    assert "4 trace(s) differ from their goldens" in state["head"]["problems"]
    # a page load shows it (the report was rewritten)
    html = request(served["url"])[1].decode()
    assert re.findall(r'class="filter-label">([^<]*)<', html) == ["failed (4)", "passed (1)"]
    assert "4 trace(s) differ from their goldens" in html
    assert json.loads(request(served["url"] + "api/state")[1])["changed"] == []  # caught up once


def test_a_page_load_catches_up_without_reading_an_unchanged_index(served, monkeypatch):
    """The page's poll is cheap: an index file whose stat is unchanged (and not racy) is not read."""
    from farm.serve import index_watch

    monkeypatch.setattr(index_watch, "RACY_S", 0.0)
    request(served["url"] + "api/state")  # seen with a trusted stat
    loads = []
    real = index_watch.GoldenIndex.load
    monkeypatch.setattr(index_watch.GoldenIndex, "load", classmethod(lambda cls, root: loads.append(root)
                                                                     or real.__func__(cls, root)))
    for _ in range(5):
        assert request(served["url"] + "api/state")[0] == 200
    assert loads == []
    G.reject(served["goldens"], served["run"], [K_PASS], by="terminal")
    loads.clear()
    status, state = request(served["url"] + "api/state")
    assert loads and json.loads(state)["changed"] == [K_PASS]


@pytest.mark.slow  # Chromium and a farm process
@pytest.mark.skipif(browser.available() is not None, reason=browser.available() or "")
def test_chromium_page_stays_current_and_says_when_the_goldens_changed_elsewhere(served):
    with browser.Browser() as b:
        b.get(served["url"])
        b.wait_for("return document.body.dataset.ready === '1'")
        text = "return document.querySelector(arguments[0]).textContent"
        assert "failed (4)" in b.run(text, "#status-filter")
        assert "4 trace(s) differ" in b.run(text, "#problems")
        b.click(b.find("#approve-failed"))
        b.wait_for("return document.getElementById('bulk-result').textContent.includes('approved')")
        assert b.run(text, "#verdict-word") == "PASSED"
        assert b.run("return document.getElementById('problems').hidden") is True
        assert "failed" not in b.run(text, "#status-filter") and "passed (5)" in b.run(text, "#status-filter")
        assert b.run(text, "#failed-count") == "0"
        decision = GoldenIndex.load(served["goldens"]).log()[-1]["id"]
        terminal_undo(served, decision)
        b.wait_for("return !document.getElementById('stale').hidden", timeout=15)
        assert "4 trace(s) changed by decisions made outside this page" in b.run(text, "#stale")
        assert b.run(text, "#verdict-word") == "FAILED" and "failed (4)" in b.run(text, "#status-filter")
        assert b.run(text, "#failed-count") == "4"
        row = f'#trace-list tr.row[data-key="{FAILS[0]}"]'
        assert b.run("return document.querySelector(arguments[0]).dataset.status", row) == "fail"
        # the page's own POSTs pass the Origin check (a browser sends Origin with every POST)
        b.click(b.find("#approve-failed"))
        b.wait_for("return document.getElementById('bulk-result').textContent.includes('4 trace(s) approved')")
        time.sleep(0.1)
        assert b.severe_logs() == []
