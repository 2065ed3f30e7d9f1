"""Reports: the HTML page (order, contents, escaping of strings from model files), JUnit XML,
Markdown, and headless Chromium switching every view and filter without a console error."""

from __future__ import annotations

import json
import os
import re
import xml.etree.ElementTree as ET

import browser
import pytest
from golden_runs import INTEL, broken, image, key, make_run, noisy

from farm import goldens as G
from farm.compare.runs import compare_run, diff_runs
from farm.plan.keys import parse_key
from farm.report import junit_xml, markdown_summary, write_report
from farm.report.html import build_views
from farm.report.images import heatmap_relpath, image_relpath

os.environ.setdefault("EGL_PLATFORM", "surfaceless")
os.environ.setdefault("PYOPENGL_PLATFORM", "egl")

EVIL = "<img src=x onerror=alert(1)>"
PASS_X, PASS_S = key("models/a.mdx", "Stand", 0), key("models/a.mdx", "Stand", 500)
FAIL, NEW = key("models/b.mdx", "Walk", 0), key("models/c.mdx", "Stand", 0)
REJ, ERR = key("models/b.mdx", "Walk", 300), key("models/d.mdx", "Stand", 0)
EVIL_KEY = key("models/e.mdx", EVIL.replace("|", "%7C"), 0)
BY = "Rita Reviewer"


@pytest.fixture(scope="module")
def mixed(tmp_path_factory):
    """A run with every status, compared and reported; returns (results, report folder)."""
    tmp = tmp_path_factory.mktemp("mixed")
    g = tmp / "goldens"
    base = make_run(tmp / "store", {PASS_X: image(1), PASS_S: image(2), FAIL: image(3), REJ: image(4),
                                    ERR: image(5), EVIL_KEY: image(6)})
    G.approve(g, base, list(base.traces), by=BY)
    bad = make_run(tmp / "store", {REJ: broken(image(4))})
    G.reject(g, bad, [REJ], by=BY, reason="known <b>bad</b>")
    run = make_run(tmp / "store", {PASS_X: image(1), PASS_S: noisy(image(2, alpha=True) * 0 + image(2), 2),
                                   FAIL: broken(image(3)), NEW: image(7, alpha=True), REJ: broken(image(4)),
                                   ERR: "GL context lost", EVIL_KEY: broken(image(6))}, gl=INTEL)
    results = compare_run(run, g)
    out = tmp / "report"
    write_report(results, out)
    return results, out


def sections(html: str) -> list[tuple[str, str]]:
    return re.findall(r'<section class="trace[^"]*" id="[^"]+" data-status="([^"]+)" data-group="[^"]+" '
                      r'data-model="[^"]*" data-key="([^"]*)"', html)


def test_statuses_and_order_failures_then_new_then_passed(mixed):
    results, out = mixed
    statuses = {k: t["status"] for k, t in results["traces"].items()}
    assert statuses == {PASS_X: "pass", PASS_S: "pass", FAIL: "fail", NEW: "new", REJ: "rejected", ERR: "error",
                        EVIL_KEY: "fail"}
    html = (out / "index.html").read_text()
    order = [s for s, _ in sections(html)]
    assert order == ["error", "rejected", "fail", "fail", "new", "pass", "pass"]
    groups = ["failed" if s in ("error", "rejected", "fail") else s for s in order]
    assert groups == sorted(groups, key=["failed", "new", "pass"].index)


def test_report_holds_images_metrics_thresholds_and_commands(mixed):
    results, out = mixed
    html = (out / "index.html").read_text()
    fail = results["traces"][FAIL]
    # images copied into the folder and referenced relatively
    for rel in (image_relpath(fail["png"]), image_relpath(fail["golden"]["png"]), heatmap_relpath(fail["diff_image"]),
                heatmap_relpath(fail["ssim_image"])):
        assert (out / rel).is_file() and rel.startswith("img/") and rel.count("/") == 2  # img/ab/abcd...png
        assert f'src="{rel}"' in html
    assert "http://" not in html.replace("http-equiv", "") and "https://" not in html
    assert "Content-Security-Policy" in html and "script-src &#39;self&#39;" not in html  # not double-escaped
    # metrics with their thresholds
    assert f"{fail['metrics']['ssim']:.6f}" in html and "&gt;= 0.99" in html and "&lt;= 0.1%" in html
    assert "pixels off by more than 16" in html
    # what rendered each image, and the approve command
    assert "GenuineIntel" in html and "AuthenticAMD" in html and f"approved by</dt><dd>{BY}" in html
    assert f"farm approve {results['job']} --trace " in html
    assert "farm reject" in html
    assert "approve every new trace" in html and "--new" in html
    # filters: one checkbox per status present, one option per model
    assert re.findall(r'<input type="checkbox" value="(\w+)" checked>', html) == ["error", "rejected", "fail", "new",
                                                                                  "pass"]
    assert len(re.findall(r'<option value="models/', html)) == 5


def test_strings_from_model_files_are_escaped(mixed):
    results, out = mixed
    html = (out / "index.html").read_text()
    assert EVIL not in html and "<b>bad</b>" not in html
    assert "&lt;img src=x onerror=alert(1)&gt;" in html
    assert "known &lt;b&gt;bad&lt;/b&gt;" in html
    md = (out / "summary.md").read_text()
    assert EVIL not in md and "&lt;img src=x onerror=alert&#40;1&#41;&gt;" in md


def test_junit_has_one_case_per_trace(mixed):
    results, out = mixed
    root = ET.fromstring((out / "junit.xml").read_text())
    cases = root.findall("./testsuite/testcase")
    assert len(cases) == len(results["traces"]) == int(root.get("tests"))
    by_name = {f"{parse_key(k).model}|{parse_key(k).rest}": c for k in results["traces"] for c in cases
               if c.get("name") == parse_key(k).rest
               and c.get("classname") == parse_key(k).model.replace(".", "_").replace("/", ".")}
    assert set(by_name) == set(results["traces"])
    assert by_name[FAIL].find("failure").get("type") == "fail"
    assert by_name[REJ].find("failure").get("type") == "rejected"
    assert by_name[NEW].find("failure").get("type") == "new"
    assert by_name[ERR].find("error") is not None
    assert by_name[PASS_X].find("failure") is None and by_name[PASS_X].find("error") is None
    assert json.loads(by_name[PASS_S].find("system-out").text)["match"] == "similar"
    suite = root.find("testsuite")
    assert (root.get("failures"), root.get("errors"), suite.get("skipped")) == ("4", "1", "0")
    allowed = ET.fromstring(junit_xml({**results, "allow_new": True})).find("testsuite")
    assert allowed.get("skipped") == "1" and allowed.get("failures") == "3"


def test_junit_survives_control_characters():
    k = key("models/x.mdx", "Bad\x01\x1bName", 0)
    results = {"kind": "goldens", "job": "j", "traces": {k: {"key": k, "status": "fail", "reason": "r\x00",
                                                              "metrics": None}}}
    root = ET.fromstring(junit_xml(results))
    assert root.find("./testsuite/testcase").get("name").startswith("Bad\\x01\\x1bName")  # shown, as farm.escape.xml


def test_markdown_summary(mixed):
    results, out = mixed
    md = (out / "summary.md").read_text()
    assert md.startswith(f"## modelfarm <code>{results['job']}</code>: ❌ failed")
    assert "| fail | 2 |" in md and "| new | 1 |" in md and "| pass | 2 |" in md and "| rejected | 1 |" in md
    assert "### Worst differences (4 of 4)" in md
    assert "<img" not in md  # no --image-base: no image links (relative ones break once posted; test_summary_links)
    fail = results["traces"][FAIL]
    published = markdown_summary(results, build_views(results, out), image_base="https://ci/r/")
    assert f'<img src="https://ci/r/{image_relpath(fail["png"])}" width="96" alt="new">' in published
    assert f'<img src="https://ci/r/{heatmap_relpath(fail["diff_image"])}" width="96" alt="difference">' in published
    assert "### New traces (no golden yet) (1 of 1)" in md
    assert f"farm approve {results['job']} --new" not in md  # the runner's store: never (issue 32)
    assert f"farm approve {out.name} --new" in md  # the report folder, as CI uploads it
    # the key of every table row stays in its cell: '|' inside keys is escaped
    for line in md.splitlines():
        if line.startswith("| <code>"):
            assert line.count("|") in (3, 6), line
    for line in published.splitlines():
        if line.startswith("| <code>"):
            assert line.count("|") in (4, 9), line
    # published elsewhere: image links get the base URL of the report folder, images are in its img/
    views_md = markdown_summary(results, [{"key": FAIL, "new_src": "img/n.png"}], image_base="https://ci/r/")
    assert '<img src="https://ci/r/img/n.png"' in views_md
    assert "**[Full report](https://ci/r/index.html)**" in views_md


def test_diff_report_labels(tmp_path):
    k_same, k_changed, k_gone, k_added = (key(t=t) for t in (0, 100, 200, 300))
    base = make_run(tmp_path / "s", {k_same: image(1), k_changed: image(2), k_gone: image(3)})
    head = make_run(tmp_path / "s", {k_same: image(1), k_changed: broken(image(2)), k_added: image(4)})
    results = diff_runs(base, head)
    write_report(results, tmp_path / "r")
    html = (tmp_path / "r" / "index.html").read_text()
    assert [s for s, _ in sections(html)] == ["changed", "added", "removed", "unchanged"]
    assert "Changes found" in html and ">head</figcaption>" in html and ">base</figcaption>" in html
    assert "farm approve" not in html  # nothing to approve in a diff


# --- headless Chromium

def needs_chromium(test):
    """A test in Chromium: skipped without it, and slow (a real browser process; not in make test-fast)."""
    return pytest.mark.slow(pytest.mark.skipif(browser.available() is not None, reason=browser.available() or "")(test))

VISIBLE = """
const s = document.querySelector(arguments[0]);
return Array.from(s.querySelectorAll('.view')).filter(v => getComputedStyle(v).display !== 'none')
  .map(v => v.className.replace('view ', ''));
"""


@needs_chromium
def test_chromium_switches_every_view_and_filter_without_console_errors(mixed):
    results, out = mixed
    fail_id = "#" + re.search(r'id="(t-[0-9a-f]+)" data-status="fail"', (out / "index.html").read_text()).group(1)
    with browser.Browser() as b:
        b.get((out / "index.html").as_uri())
        b.wait_for("return document.body.dataset.ready === '1'")
        assert b.run("return document.title").startswith("modelfarm: ")
        assert b.run("return window.__xss === undefined && document.querySelectorAll('img[src=x]').length") == 0
        assert b.run(VISIBLE, fail_id) == ["view-side"]
        # every global view, then back: each trace with two images shows exactly that view
        for view in ("swap", "slider", "onion", "side"):
            b.click(b.find(f"#views button[data-view={view}]"))
            assert b.run(VISIBLE, fail_id) == [f"view-{view}"]
            assert b.run("return document.querySelector(arguments[0]).dataset.view", fail_id) == view
            assert b.run("return document.querySelector('#views button[aria-pressed=true]').dataset.view") == view
        # one trace's own buttons
        b.click(b.find(f"{fail_id} .view-buttons button[data-view=swap]"))
        assert b.run(VISIBLE, fail_id) == ["view-swap"]
        # swap on hover shows the new frame, leaving shows the golden again
        over = f"{fail_id} .view-swap img.over"
        assert b.run("return getComputedStyle(document.querySelector(arguments[0])).visibility", over) == "hidden"
        b.hover(b.find(f"{fail_id} .swap-area"))
        b.wait_for("return getComputedStyle(document.querySelector(arguments[0])).visibility === 'visible'", over)
        assert "new frame" in b.run("return document.querySelector(arguments[0]).textContent",
                                    f"{fail_id} .swap-caption")
        b.move_away()
        b.wait_for("return getComputedStyle(document.querySelector(arguments[0])).visibility === 'hidden'", over)
        # the slider clips the new frame; onion skin sets its opacity
        b.click(b.find(f"{fail_id} .view-buttons button[data-view=slider]"))
        set_range = ("const i = document.querySelector(arguments[0]); i.value = arguments[1];"
                     " i.dispatchEvent(new Event('input')); return true;")
        b.run(set_range, f"{fail_id} .slider-input", 30)
        assert b.run("return document.querySelector(arguments[0]).style.clipPath",
                     f"{fail_id} .view-slider img.over") == "inset(0px 70% 0px 0px)"
        b.click(b.find(f"{fail_id} .view-buttons button[data-view=onion]"))
        b.run(set_range, f"{fail_id} .onion-input", 25)
        assert b.run("return getComputedStyle(document.querySelector(arguments[0])).opacity",
                     f"{fail_id} .view-onion img.over") == "0.25"
        # images load (natural sizes) and zoom scales them
        b.run("document.querySelector(arguments[0]).scrollIntoView(); return 1", fail_id)
        b.wait_for("return Array.from(document.querySelectorAll(arguments[0] + ' img'))"
                   ".every(i => i.complete && i.naturalWidth > 0)", fail_id)
        b.run("const z = document.getElementById('zoom'); z.value = '4'; z.dispatchEvent(new Event('change'));"
              " return 1")
        assert b.run("return document.querySelector(arguments[0]).style.width", f"{fail_id} .view-side img") == "128px"
        # filters: by status, then by model
        shown = ("return Array.from(document.querySelectorAll('section.trace')).filter(s => !s.hidden)"
                 ".map(s => s.dataset.key)")
        assert len(b.run(shown)) == 7
        b.click(b.find("#status-filter input[value=pass]"))
        b.click(b.find("#status-filter input[value=error]"))
        assert sorted(b.run(shown)) == sorted([FAIL, NEW, REJ, EVIL_KEY])
        assert b.run("return document.getElementById('shown-count').textContent") == "4 of 7 traces shown"
        b.run("const m = document.getElementById('model-filter'); m.value = 'models/b.mdx';"
              " m.dispatchEvent(new Event('change')); return 1")
        assert sorted(b.run(shown)) == sorted([FAIL, REJ])
        b.run("const m = document.getElementById('model-filter'); m.value = '';"
              " m.dispatchEvent(new Event('change')); return 1")
        b.click(b.find("#status-filter input[value=pass]"))
        assert len(b.run(shown)) == 6
        # the escaped model string is shown as text, never as an element
        assert EVIL in b.run("return document.body.innerText")
        assert b.run("return document.querySelectorAll('img[src=x], img[onerror]').length") == 0
        assert b.severe_logs() == []


@needs_chromium
def test_chromium_real_render_of_a_model_with_markup_in_its_names(tmp_path, monkeypatch):
    """A real model whose sequence is named like an XSS payload, rendered by the farm: the report
    shows the name as text and the browser logs nothing (an injected <img src=x> would log a
    failed load, and onerror would run)."""
    pytest.importorskip("renderer.anim")
    monkeypatch.delenv("FARM_BROKER_URL", raising=False)
    from farm.run.jobs import run_job
    from renderer.formats.mdx import save_mdx
    from renderer.samples import SAMPLES, write_samples

    write_samples(tmp_path / "models")  # textures
    model, _ = SAMPLES["crate"]()
    model.sequences[0].name = EVIL
    save_mdx(model, tmp_path / "models" / "crate.mdx")
    weird = tmp_path / "models" / "q\"'&<b>.mdx"
    weird.write_bytes((tmp_path / "models" / "crate.mdx").read_bytes())
    (tmp_path / "job.toml").write_text('size = "32x32"\nsequences = [0]\n[[models]]\npaths = ["models/*.mdx"]\n')
    job = run_job(tmp_path / "job.toml", out=tmp_path / "store", workers=1, progress=False)
    assert job.counts()["done"] == len(job.traces) >= 4
    assert any(EVIL in k for k in job.traces)
    results = compare_run(job, tmp_path / "goldens")
    write_report(results, tmp_path / "report")
    html = (tmp_path / "report" / "index.html").read_text()
    assert EVIL not in html and "<b>.mdx" not in html and "&lt;b&gt;.mdx" in html
    with browser.Browser() as b:
        b.get((tmp_path / "report" / "index.html").as_uri())
        b.wait_for("return document.body.dataset.ready === '1'")
        text = b.run("return document.body.innerText")
        assert EVIL in text and "q\"'&<b>.mdx" in text
        assert b.run("return document.querySelectorAll('img[src=x], img[onerror], b').length") == 0
        for view in ("swap", "slider", "onion", "side"):
            b.click(b.find(f"#views button[data-view={view}]"))
        b.run("const m = document.getElementById('model-filter'); m.value = arguments[0];"
              " m.dispatchEvent(new Event('change')); return 1", "models/q\"'&<b>.mdx")
        assert b.run("return document.querySelectorAll('section.trace:not([hidden])').length") == 1
        assert b.severe_logs() == []
