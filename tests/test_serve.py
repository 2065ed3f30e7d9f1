"""`farm serve`: the report over HTTP on loopback, Approve/Reject/Undo endpoints that change the
golden index, their guards (token, Host, JSON), and a click on Approve in headless Chromium."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import urllib.error
import urllib.request
from pathlib import Path

import browser
import pytest
from golden_runs import broken, image, key, make_run

from farm.goldens import GoldenIndex
from farm.serve.server import ReportServer, make_server

ROOT = Path(__file__).resolve().parents[1]
K_PASS, K_FAIL, K_NEW = key(t=0), key(t=500), key("models/b.mdx", "Walk", 0)


@pytest.fixture
def served(tmp_path):
    g = tmp_path / "goldens"
    base = make_run(tmp_path / "store", {K_PASS: image(1), K_FAIL: image(2)})
    from farm import goldens as G

    G.approve(g, base, list(base.traces), by="setup")
    run = make_run(tmp_path / "store", {K_PASS: image(1), K_FAIL: broken(image(2)), K_NEW: image(3)})
    state = ReportServer(run, g, by="Serve Tester")
    server = make_server(state, "127.0.0.1", 0)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    url = f"http://127.0.0.1:{server.server_address[1]}/"
    try:
        yield {"url": url, "state": state, "goldens": g, "run": run}
    finally:
        server.shutdown()
        server.server_close()
        state.close()


def request(url, data=None, headers=None, method=None):
    req = urllib.request.Request(url, data=None if data is None else json.dumps(data).encode(), method=method,
                                 headers={"Content-Type": "application/json", **(headers or {})})
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


def test_pages_and_static_files(served):
    status, body = request(served["url"])
    assert status == 200 and b'data-mode="serve"' in body and served["state"].token.encode() in body
    assert b'class="approve"' in body and b'id="undo"' in body
    assert request(served["url"] + "static/report.js")[0] == 200
    assert request(served["url"] + "favicon.ico")[0] == 204
    assert request(served["url"] + "../../../etc/passwd")[0] == 404
    assert request(served["url"] + "static/%2e%2e/%2e%2e/goldens.py")[0] == 404
    assert request(served["url"], headers={"Host": "evil.example:80"})[0] == 421


def test_post_guards(served):
    api = served["url"] + "api/approve"
    token = {"X-Farm-Token": served["state"].token}
    assert request(api, {"key": K_NEW})[0] == 403
    assert request(api, {"key": K_NEW}, {"X-Farm-Token": "guess"})[0] == 403
    assert request(api, {"key": K_NEW}, {**token, "Host": "attacker.example"})[0] == 421
    assert request(api, {"key": K_NEW}, {**token, "Content-Type": "text/plain"})[0] == 415
    assert request(served["url"] + "api/nope", {}, token)[0] == 404
    assert request(api, {}, token)[0] == 400
    assert GoldenIndex.load(served["goldens"]).entry(K_NEW) is None


def test_approve_reject_undo_endpoints_change_the_index(served):
    api, token = served["url"] + "api/", {"X-Farm-Token": served["state"].token}
    status, body = request(api + "approve", {"key": K_NEW}, token)
    out = json.loads(body)
    assert status == 200 and out["ok"] and out["status"] == "pass"
    entry = GoldenIndex.load(served["goldens"]).entry(K_NEW)
    assert entry["approved"][0]["by"] == "Serve Tester" and entry["approved"][0]["run"] == served["run"].id
    # the report on disk follows
    page = request(served["url"])[1].decode()
    card = next(c for c in page.split("<section")[1:] if f'data-key="{K_NEW}"' in c)
    assert 'data-status="pass"' in card.split(">", 1)[0]
    out = json.loads(request(api + "reject", {"key": K_FAIL}, token)[1])
    assert out["ok"] and out["status"] == "rejected"
    assert GoldenIndex.load(served["goldens"]).entry(K_FAIL)["rejected"][0]["by"] == "Serve Tester"
    out = json.loads(request(api + "undo", {}, token)[1])
    assert out["ok"] and "undid reject" in out["message"]
    assert GoldenIndex.load(served["goldens"]).entry(K_FAIL)["rejected"] == []
    out = json.loads(request(api + "approve", {"key": "no|such|trace"}, token)[1])
    assert not out["ok"]
    # env-only approval lands on the environment's own line
    out = json.loads(request(api + "approve", {"key": K_FAIL, "env": True}, token)[1])
    assert out["ok"] and "for llvmpipe" in out["message"]


def test_only_loopback(served):
    with pytest.raises(ValueError, match="loopback"):
        make_server(served["state"], "0.0.0.0", 0)


@pytest.mark.slow  # Chromium
@pytest.mark.skipif(browser.available() is not None, reason=browser.available() or "")
def test_chromium_click_on_approve_changes_the_golden_index(served):
    with browser.Browser() as b:
        b.get(served["url"])
        b.wait_for("return document.body.dataset.ready === '1'")
        new = f'section.trace[data-key="{K_NEW}"]'
        fail = f'section.trace[data-key="{K_FAIL}"]'
        assert b.run("return document.querySelector(arguments[0]).dataset.status", new) == "new"
        b.click(b.find(f"{new} button.approve"))
        b.wait_for("return document.querySelector(arguments[0]).dataset.decided === 'approve'", new)
        assert b.run("return document.querySelector(arguments[0] + ' .badge').textContent", new) == "approved"
        assert "approved" in b.run("return document.querySelector(arguments[0] + ' .action-result').textContent",
                                   new)
        entry = GoldenIndex.load(served["goldens"]).entry(K_NEW)
        assert entry is not None and entry["approved"][0]["by"] == "Serve Tester"
        # Reject on the failed trace marks its image known-bad
        b.click(b.find(f"{fail} button.reject"))
        b.wait_for("return document.querySelector(arguments[0]).dataset.decided === 'reject'", fail)
        assert GoldenIndex.load(served["goldens"]).entry(K_FAIL)["rejected"]
        # a reload shows the new state, and Undo reverses the rejection
        b.get(served["url"])
        b.wait_for("return document.body.dataset.ready === '1'")
        assert b.run("return document.querySelector(arguments[0]).dataset.status", new) == "pass"
        assert b.run("return document.querySelector(arguments[0]).dataset.status", fail) == "rejected"
        b.click(b.find("#undo"))
        b.wait_for("return document.getElementById('undo-result').textContent.includes('undid reject')")
        assert GoldenIndex.load(served["goldens"]).entry(K_FAIL)["rejected"] == []
        assert b.severe_logs() == []


@pytest.mark.slow  # a farm serve process
def test_farm_serve_command(tmp_path):
    run = make_run(tmp_path / "store", {K_NEW: image(3)})
    env = {**os.environ, "PYTHONPATH": str(ROOT), "FARM_USER": "cli"}
    proc = subprocess.Popen([sys.executable, "-m", "farm.cli", "serve", run.id, "--out", str(tmp_path / "store"),
                             "--goldens", str(tmp_path / "goldens"), "--port", "0"],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env, cwd=tmp_path)
    try:
        line = proc.stdout.readline()
        assert "farm serve:" in line and "http://127.0.0.1:" in line, line
        url = line.split(" on ", 1)[1].split()[0]
        status, body = request(url)
        assert status == 200 and K_NEW.encode() in body
    finally:
        proc.terminate()
        proc.wait(10)


def test_saved_results_are_current_after_decisions_made_here_and_elsewhere(served):
    """The server compares again every trace whose golden lines changed, whoever changed them, so the
    comparison it saves is the one a fresh `farm compare` makes and is reused as such."""
    from farm import goldens as G
    from farm.compare.runs import compare_run, load_results

    api, token = served["url"] + "api/", {"X-Farm-Token": served["state"].token}
    run, g = served["run"], served["goldens"]
    request(api + "approve", {"key": K_NEW}, token)
    G.reject(g, run, [K_PASS], by="someone in a terminal")  # behind the server's back
    status, out = request(api + "undo", {}, token)  # undoes the last decision: the terminal's
    out = json.loads(out)
    assert status == 200 and "undid reject" in out["message"] and out["elsewhere"] == [K_PASS], out
    assert out["statuses"][K_PASS][0] == "pass" and K_NEW not in out["statuses"]
    G.reject(g, run, [K_NEW], by="someone in a terminal")
    assert request(served["url"])[0] == 200  # a page load catches up
    saved = load_results(run)
    fresh = compare_run(run, g, write=False)
    assert saved["goldens_digest"] == GoldenIndex.load(g).digest() == fresh["goldens_digest"]
    assert {k: t["status"] for k, t in saved["traces"].items()} == {k: t["status"] for k, t in fresh["traces"].items()}
    assert saved["counts"] == fresh["counts"] and saved["problems"] == fresh["problems"]


def test_beyond_loopback_every_request_needs_the_token(tmp_path):
    """`farm serve --host 0.0.0.0` in a container (docker/compose.yaml, service serve): only with
    FARM_SERVE_TOKEN; then pages too need it: the link's ?token= once (a cookie after that)."""
    import http.client

    g = tmp_path / "goldens"
    run = make_run(tmp_path / "store", {K_NEW: image(3)})
    state = ReportServer(run, g, by="Remote Tester", token="s3cret-token")
    with pytest.raises(ValueError, match="only with FARM_SERVE_TOKEN"):
        make_server(state, "0.0.0.0", 0)
    server = make_server(state, "0.0.0.0", 0, token="s3cret-token")
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    port = server.server_address[1]
    try:
        def get(path, headers=None):
            c = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
            c.request("GET", path, headers={"Host": "triage.example:8765", **(headers or {})})
            r = c.getresponse()
            body = r.read()
            c.close()
            return r.status, dict(r.getheaders()), body

        assert get("/")[0] == 401 and get("/?token=wrong")[0] == 401
        status, headers, _ = get("/?token=s3cret-token")
        assert status == 303 and headers["Location"] == "/"
        cookie = headers["Set-Cookie"].split(";")[0]
        assert cookie == "farm_token=s3cret-token" and "HttpOnly" in headers["Set-Cookie"]
        status, _, body = get("/", {"Cookie": cookie})
        assert status == 200 and b"Remote Tester" not in body[:0] and b"<html" in body.lower()
        url = f"http://127.0.0.1:{port}/api/approve"
        assert request(url, {"key": K_NEW})[0] == 403
        code, raw = request(url, {"key": K_NEW}, {"X-Farm-Token": "s3cret-token"})
        assert code == 200 and json.loads(raw)["ok"]
    finally:
        server.shutdown()
        server.server_close()
        state.close()
