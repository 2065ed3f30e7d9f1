"""Issue 33 item 1: a report cut into pages (farm.report.pages). The landing page holds the verdict,
the counts and the failures first, a page of cards; every other trace is on a further page and
reachable from any page by search and filter through the row files, loaded only when asked;
images in shards (farm.report.images); junit.xml written in pieces, valid against Jenkins' schema.
The page sizes are made small here so a few dozen traces make several pages."""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET
from pathlib import Path

import browser
import pytest
import xmlschema
from golden_runs import broken, image, key, make_run

from farm.cli import main
from farm.compare.runs import compare_run
from farm.report import pages as P
from farm.report import write_report
from farm.report.images import image_relpath
from farm.report.junit import junit_xml

XSD = Path(__file__).parent / "data" / "junit-jenkins.xsd"
HOSTILE = key("models/h.mdx", '<img src=x onerror="document.title=1">', 0)
MODELS = [f"models/m{i:02d}.mdx" for i in range(22)]
FAILING = {MODELS[3], MODELS[17]}


@pytest.fixture
def paged(tmp_path, monkeypatch):
    """A run of 26 traces (2 failing, 2 new, a hostile key, a filmstrip of 3) compared with goldens, and
    its report written 5 cards and 2 strip frames a page, 7 rows a row file."""
    monkeypatch.setenv("FARM_USER", "ci")
    monkeypatch.setattr(P, "PAGE_CARDS", 5)
    monkeypatch.setattr(P, "PAGE_STRIP_FRAMES", 2)
    monkeypatch.setattr(P, "ROWS_PER_FILE", 7)
    first = {key(m): image(i) for i, m in enumerate(MODELS)}
    first.update({key("models/s.mdx", "Walk", t): image(40 + t // 100) for t in (0, 100, 200)})
    base = make_run(tmp_path / "store", first, job_id="base")
    goldens = tmp_path / "goldens"
    assert main(["approve", base.id, "--all", "--out", str(tmp_path / "store"), "--goldens", str(goldens)]) == 0
    frames = {k: (broken(v) if k.split("|")[0] in FAILING else v) for k, v in first.items()}
    frames[key("models/n1.mdx")] = image(60)
    frames[HOSTILE] = image(61)
    run = make_run(tmp_path / "store", frames, job_id="head")
    results = compare_run(run, goldens)
    out = tmp_path / "report"
    write_report(results, out)
    return results, out


def cards(html: str) -> list[str]:
    return [json.loads(f'"{k}"') for k in re.findall(r'<section class="trace [^>]*data-key="([^"]*)"', html)]


def test_pages_hold_every_trace_once_failures_first(paged):
    results, out = paged
    n = len(results["traces"])
    assert n == 27
    html = (out / "index.html").read_text()
    pages = [html] + [(out / "pages" / f"{i}.html").read_text() for i in range(2, 7)]
    assert not (out / "pages" / "7.html").exists()
    on = [cards(p) for p in pages]
    assert [len(c) for c in on] == [5, 5, 5, 5, 5, 2]
    keys = [k.replace("&lt;", "<").replace("&gt;", ">").replace("&#34;", '"') for c in on for k in c]
    assert sorted(keys) == sorted(results["traces"])  # every trace on exactly one page
    # the landing page: verdict and counts, then the failures (and the new traces) first
    assert html.index('id="verdict"') < html.index('<section class="trace ')
    statuses = [results["traces"][k]["status"] for k in keys]
    assert statuses[:2] == ["fail", "fail"] and statuses[2:4] == ["new", "new"] and set(statuses[4:]) == {"pass"}
    assert "Page 1 of 6" in html and 'href="pages/2.html" rel="next"' in html
    # a further page: images and scripts from the folder above, links back to the landing page
    assert 'href="../static/report.css"' in pages[3] and 'href="../index.html"' in pages[3]
    srcs = re.findall(r'<img[^>]* src="([^"]+)"', pages[3])
    assert srcs and all(s.startswith("../img/") and (out / "pages" / s).resolve().is_file() for s in srcs)
    # the filmstrip is on a page of its own (2 strip frames a page: at least one strip a page)
    assert sum(p.count('<section class="filmstrip') for p in pages) == 1
    # the row files: every trace once, in report order, with its page and anchor; a hostile key is a string
    rows = []
    for i in range(1, 5):
        text = (out / "pages" / f"rows-{i}.js").read_text()
        assert text.startswith(f"farmRows({i}, ") and "<" not in text and text.isascii()
        rows += json.loads(text[len(f"farmRows({i}, "):-3])
    assert not (out / "pages" / "rows-5.js").exists()
    assert [r[0] for r in rows] == keys and [r[4] for r in rows] == [i // 5 + 1 for i in range(n)]
    # images in shards, named by their sha256
    fail = results["traces"][key(sorted(FAILING)[0])]
    assert (out / image_relpath(fail["png"])).is_file() and image_relpath(fail["png"]).count("/") == 2
    assert not [p for p in (out / "img").iterdir() if p.is_file()]


def test_a_smaller_report_in_the_same_folder_leaves_no_stale_pages(paged, monkeypatch):
    results, out = paged
    monkeypatch.setattr(P, "PAGE_CARDS", 200)
    write_report(results, out)
    assert not list((out / "pages").glob("*.html")) and not list((out / "pages").glob("rows-*.js"))
    assert len(cards((out / "index.html").read_text())) == 27 and "Page 1 of" not in (out / "index.html").read_text()


def test_junit_written_in_pieces_is_valid_and_the_same_document(paged):
    results, out = paged
    text = (out / "junit.xml").read_text()
    xmlschema.XMLSchema(str(XSD)).validate(text)
    assert text == junit_xml(results, out)
    suite = ET.fromstring(text).find("testsuite")
    assert suite.get("tests") == "27" and suite.get("failures") == str(2 + 2)  # new traces fail by default
    att = [ln for c in suite.iter("testcase") for ln in (c.find("system-out").text or "").splitlines()
           if ln.startswith("[[ATTACHMENT|")]
    assert att and all(Path(a[13:-2]).is_file() and Path(a[13:-2]).parent.parent.name == "img" for a in att)
    empty = junit_xml({"job": "j", "kind": "goldens", "traces": {}})
    xmlschema.XMLSchema(str(XSD)).validate(empty)


@pytest.mark.slow
@pytest.mark.skipif(browser.available() is not None, reason=browser.available() or "")
def test_chromium_search_and_filters_reach_every_page(paged):
    results, out = paged
    target = key(MODELS[20])  # a passed trace, on page 5
    with browser.Browser() as b:
        b.get((out / "index.html").as_uri())
        b.wait_for("return document.body.dataset.ready === '1'")
        assert b.run("return document.getElementById('all-matches').hidden") is True
        loaded = "return Array.from(document.scripts).filter(s => s.src.includes('rows-')).length"
        assert b.run(loaded) == 0  # nothing loaded until a search or filter asks
        box = b.find("#search")
        b._s("POST", f"/element/{box[browser.ELEMENT]}/value", {"text": "m20.mdx"})
        b.wait_for("return !!document.body.dataset.searched")
        found = b.run("return Array.from(document.querySelectorAll('#all-matches-list tbody tr'))"
                      ".map(r => [r.dataset.key, r.querySelector('a').getAttribute('href')])")
        page = next(r[4] for r in _rows(out) if r[0] == target)
        anchor = next(r[5] for r in _rows(out) if r[0] == target)
        assert found == [[target, f"pages/{page}.html#{anchor}"]]
        assert b.run("return document.getElementById('all-matches-count').textContent") == "1 of 27 traces match"
        # the hostile key is found as text, never markup
        b._s("POST", f"/element/{box[browser.ELEMENT]}/clear", {})
        b._s("POST", f"/element/{box[browser.ELEMENT]}/value", {"text": "onerror"})
        b.wait_for("return document.getElementById('all-matches-count').textContent === '1 of 27 traces match' &&"
                   " document.querySelector('#all-matches-list code').textContent === arguments[0]", HOSTILE)
        assert b.run("return document.querySelectorAll('#all-matches-list img').length") == 0
        assert b.run("return document.title") != "1"
        # a status filter alone: only the failed traces of every page
        b._s("POST", f"/element/{box[browser.ELEMENT]}/clear", {})
        for s in ("new", "pass"):
            b.click(b.find(f'#status-filter input[value="{s}"]'))
        b.wait_for("return document.getElementById('all-matches-count').textContent === '2 of 27 traces match'")
        keys = b.run("return Array.from(document.querySelectorAll('#all-matches-list tbody tr'))"
                     ".map(r => r.dataset.key)")
        assert sorted(keys) == sorted(key(m) for m in FAILING)
        # following a match opens its page at its card
        b.click(b.find('#status-filter input[value="pass"]'))
        b._s("POST", f"/element/{box[browser.ELEMENT]}/value", {"text": "m20.mdx"})
        b.wait_for("return document.querySelectorAll('#all-matches-list tbody tr a').length === 1 &&"
                   " document.querySelector('#all-matches-list tbody tr').dataset.key === arguments[0]", target)
        b.click(b.find("#all-matches-list tbody tr a"))
        b.wait_for("return location.pathname.endsWith(arguments[0]) && document.body.dataset.ready === '1'",
                   f"pages/{page}.html")
        assert b.run("return document.getElementById(arguments[0]).dataset.key", anchor) == target
        b.wait_for("return document.getElementById(arguments[0]).querySelector('img').naturalWidth === 32", anchor)
        assert b.severe_logs() == []


def _rows(out: Path) -> list[list]:
    rows = []
    for f in sorted((out / "pages").glob("rows-*.js"), key=lambda p: int(p.stem[5:])):
        text = f.read_text()
        rows += json.loads(text[text.index(", ") + 2:-3])
    return rows
