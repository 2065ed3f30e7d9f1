"""Issue 32, item 1: `farm approve REPORT` / `farm reject REPORT` from a published report alone.

A run is compared and its report folder written, then the run's store is deleted (the CI runner is
gone): approving from the folder, or from its URL on a real http.server on loopback (directly and
through an HTTP proxy), makes exactly the report's images the goldens and records where they came
from; an image whose bytes do not match its results, a missing image, a 404 and a download cut
short are one sentence each with nothing written. https with a self-signed certificate works with
REQUESTS_CA_BUNDLE / SSL_CERT_FILE and is one sentence without. Images made by hand (golden_runs),
no GL."""

from __future__ import annotations

import hashlib
import http.server
import json
import shutil
import ssl
import subprocess
import threading
import urllib.parse
from pathlib import Path

import numpy as np
import pytest
from golden_runs import broken, image, key, make_run

from farm.cli import main
from farm.compare.runs import compare_run
from farm.goldens import GoldenIndex
from farm.report import write_report
from farm.report.published import image_names

A, B, C = key("models/a.mdx"), key("models/b.mdx"), key("models/c.mdx")


def farm(*args) -> int:
    return main([str(a) for a in args])


def snapshot(folder: Path) -> dict:
    """Every file under `folder` and its bytes (to show that nothing was written)."""
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


@pytest.fixture
def published(tmp_path, monkeypatch):
    """goldens/ with A and B approved; run 2 (A changed, B the same, C new and blank) compared and
    its report written to farm-report/ (as on CI, with GitHub's variables); run 2's store deleted."""
    for name in ("FARM_GOLDENS", "FARM_OUT", "FARM_BROKER_URL", "NO_PROXY", "no_proxy", "HTTP_PROXY", "http_proxy",
                 "HTTPS_PROXY", "https_proxy", "REQUESTS_CA_BUNDLE", "SSL_CERT_FILE", "CURL_CA_BUNDLE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("FARM_USER", "reviewer")
    monkeypatch.chdir(tmp_path)
    goldens = tmp_path / "goldens"
    first = make_run(tmp_path / "store1", {A: image(0), B: image(1)}, job_id="first")
    assert farm("approve", "first", "--out", tmp_path / "store1", "--goldens", goldens, "--all") == 0
    blank = np.zeros((32, 32, 4), np.uint8)
    second = make_run(tmp_path / "store2", {A: broken(image(0)), B: image(1), C: blank}, job_id="second")
    results = compare_run(second, goldens)
    assert results["traces"][A]["status"] == "fail" and results["traces"][C]["status"] == "new"
    for name, value in {"GITHUB_ACTIONS": "true", "GITHUB_RUN_ID": "4242", "GITHUB_REPOSITORY": "mods/units",
                        "GITHUB_SERVER_URL": "https://github.com", "GITHUB_JOB": "visual-diff"}.items():
        monkeypatch.setenv(name, value)
    write_report(results, tmp_path / "farm-report")
    for name in ("GITHUB_ACTIONS", "GITHUB_RUN_ID", "GITHUB_REPOSITORY", "GITHUB_SERVER_URL", "GITHUB_JOB"):
        monkeypatch.delenv(name)
    shutil.rmtree(tmp_path / "store2")
    shutil.rmtree(tmp_path / "store1")
    del first
    return {"root": tmp_path, "goldens": goldens, "report": tmp_path / "farm-report", "results": results}


def png_of(results: dict, trace: str) -> str:
    return results["traces"][trace]["png"]


def test_approve_failed_from_the_report_folder_alone(published, capsys):
    goldens, results = published["goldens"], published["results"]
    assert farm("approve", "farm-report", "--failed") == 0  # goldens: where the report says (goldens/)
    index = GoldenIndex.load(goldens)
    approved = index.entry(A, "*")["approved"]
    assert [a["png"] for a in approved] == [png_of(results, A)]
    png = (goldens / "images" / f"{png_of(results, A)}.png").read_bytes()
    assert hashlib.sha256(png).hexdigest() == png_of(results, A)
    assert png == (published["report"] / image_names(png_of(results, A))[0]).read_bytes()
    assert index.entry(C, "*") is None  # not selected
    rec = index.log()[-1]
    assert rec["run"] == "second" and rec["report"] == "farm-report"
    assert rec["ci_run"] == "https://github.com/mods/units/actions/runs/4242" and rec["ci_job"] == "visual-diff"
    assert "store" not in rec
    assert approved[0]["gl"]["renderer"].startswith("llvmpipe")  # from the PNG's own trace
    # the same frames again now pass
    third = make_run(published["root"] / "store3", {A: broken(image(0)), B: image(1)}, job_id="third")
    assert compare_run(third, goldens)["verdict"] == "pass"


def test_new_blank_frames_need_allow_blank_and_reject_works_from_the_report(published, capsys):
    goldens = published["goldens"]
    assert farm("approve", published["report"], "--new") == 1
    assert "the frame is blank" in capsys.readouterr().err
    assert GoldenIndex.load(goldens).entry(C, "*") is None
    assert farm("approve", published["report"] / "index.html", "--new", "--allow-blank") == 0
    marked = GoldenIndex.load(goldens).entry(C, "*")["approved"][0]
    assert marked["blank"] and marked["png"] == png_of(published["results"], C)
    assert farm("reject", "farm-report", "--trace", "models/a.mdx", "--reason", "arm inverted") == 0
    entry = GoldenIndex.load(goldens).entry(A, "*")
    assert [r["reason"] for r in entry["rejected"]] == ["arm inverted"]
    assert entry["rejected"][0]["digest"] == published["results"]["traces"][A]["digest"]
    assert GoldenIndex.load(goldens).log()[-1]["action"] == "reject"


@pytest.mark.parametrize("damage", ["changed", "missing"])
def test_an_image_that_does_not_match_its_results_writes_nothing(published, capsys, damage):
    goldens, report = published["goldens"], published["report"]
    before = snapshot(goldens)
    img = report / image_names(png_of(published["results"], A))[0]
    if damage == "changed":
        img.write_bytes(img.read_bytes()[:-20] + b"\0" * 20)
    else:
        img.unlink()
    assert farm("approve", "farm-report", "--failed", "--new", "--allow-blank") == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and A in err[0] and "nothing written" in err[0]
    assert ("does not match the sha256" in err[0]) == (damage == "changed")
    assert snapshot(goldens) == before


def test_an_image_of_the_flat_layout_is_found_by_its_digest(published):
    """A report written before the shards holds img/<sha256>.png."""
    report, png = published["report"], png_of(published["results"], A)
    sharded, flat = (report / n for n in image_names(png))
    sharded.rename(flat)
    assert farm("approve", "farm-report", "--failed") == 0
    assert GoldenIndex.load(published["goldens"]).entry(A, "*")["approved"][0]["png"] == png


class _Handler(http.server.SimpleHTTPRequestHandler):
    """Serves the test folder; a path in `cut` is sent with a Content-Length 100 bytes too long and
    the connection closed. A proxy request (an absolute URL) is served from its path."""

    cut: set = set()
    seen: list = []

    def log_message(self, *a):  # quiet
        pass

    def do_GET(self):
        path = urllib.parse.urlsplit(self.path).path
        self.seen.append(self.path)
        if path in self.cut:
            body = (Path(self.directory) / path.lstrip("/")).read_bytes()
            self.send_response(200)
            self.send_header("Content-Length", str(len(body) + 100))
            self.end_headers()
            self.wfile.write(body[: len(body) // 2])
            self.close_connection = True
            return
        self.path = path
        super().do_GET()


@pytest.fixture
def server(published):
    _Handler.cut, _Handler.seen = set(), []

    def handler(*a, **kw):
        return _Handler(*a, directory=str(published["root"]), **kw)

    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    yield httpd
    httpd.shutdown()
    httpd.server_close()


def url(httpd, path: str = "farm-report/", scheme: str = "http") -> str:
    return f"{scheme}://127.0.0.1:{httpd.server_address[1]}/{path}"


def test_approve_from_the_report_url(published, server, capsys):
    assert farm("approve", url(server, "farm-report/index.html"), "--failed") == 0
    index = GoldenIndex.load(published["goldens"])
    assert index.entry(A, "*")["approved"][0]["png"] == png_of(published["results"], A)
    assert index.log()[-1]["report"] == url(server)
    assert "/farm-report/results.json" in _Handler.seen


def test_a_404_and_a_cut_download_are_one_sentence_and_write_nothing(published, server, capsys):
    before = snapshot(published["goldens"])
    assert farm("approve", url(server, "no-such-report/"), "--failed") == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "404" in err[0] and "no-such-report/results.json" in err[0]
    _Handler.cut = {"/farm-report/results.json"}
    assert farm("approve", url(server), "--failed") == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "stopped after" in err[0] and "results.json" in err[0]
    _Handler.cut = {"/farm-report/" + image_names(png_of(published["results"], A))[0]}
    assert farm("approve", url(server), "--failed") == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "stopped after" in err[0] and png_of(published["results"], A) in err[0]
    assert snapshot(published["goldens"]) == before


def test_the_download_goes_through_the_proxy_the_environment_names(published, server, monkeypatch):
    monkeypatch.setenv("HTTP_PROXY", f"http://127.0.0.1:{server.server_address[1]}")
    assert farm("approve", "http://reports.example.invalid/farm-report/", "--failed") == 0
    assert "http://reports.example.invalid/farm-report/results.json" in _Handler.seen  # an absolute URL: a proxy
    assert GoldenIndex.load(published["goldens"]).log()[-1]["report"] == "http://reports.example.invalid/farm-report/"


@pytest.fixture
def tls_server(published, tmp_path_factory):
    if shutil.which("openssl") is None:
        pytest.skip("openssl (the program) is needed to make a certificate")
    d = tmp_path_factory.mktemp("tls")
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj", "/CN=127.0.0.1",
                    "-addext", "subjectAltName=IP:127.0.0.1", "-keyout", d / "key.pem", "-out", d / "cert.pem"],
                   check=True, capture_output=True)

    def handler(*a, **kw):
        return _Handler(*a, directory=str(published["root"]), **kw)

    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(d / "cert.pem", d / "key.pem")
    httpd.socket = ctx.wrap_socket(httpd.socket, server_side=True)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    yield httpd, d / "cert.pem"
    httpd.shutdown()
    httpd.server_close()


@pytest.mark.parametrize("variable", ["REQUESTS_CA_BUNDLE", "SSL_CERT_FILE"])
def test_https_uses_the_certificates_the_environment_names(published, tls_server, monkeypatch, capsys, variable):
    httpd, cert = tls_server
    assert farm("approve", url(httpd, scheme="https"), "--failed") == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "CERTIFICATE_VERIFY_FAILED" in err[0].upper().replace(" ", "_")
    assert GoldenIndex.load(published["goldens"]).entry(A, "*")["approved"][0]["png"] != png_of(published["results"],
                                                                                               A)
    monkeypatch.setenv(variable, str(cert))
    assert farm("approve", url(httpd, scheme="https"), "--failed") == 0
    assert GoldenIndex.load(published["goldens"]).entry(A, "*")["approved"][0]["png"] == png_of(published["results"],
                                                                                               A)


def test_the_results_file_records_where_the_report_came_from(published):
    origin = json.loads((published["report"] / "results.json").read_text())["origin"]
    assert origin["folder"] == "farm-report" and origin["goldens"] == "goldens"
    assert origin["ci"]["run_url"] == "https://github.com/mods/units/actions/runs/4242"
    assert str(published["root"]) not in json.dumps(origin)  # nothing of the runner's machine paths
