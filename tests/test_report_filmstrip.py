"""Issue 28 item 3: the report groups the traces of one model, sequence, camera and size across
timestamps into a filmstrip (golden and new rows in time order, each frame's status on it, the worst
frame marked and shown first when the strip fails, a play button that flips both rows in step), and
summary.md links each failing strip. Headless Chromium plays a strip from disk and under `farm serve`."""

from __future__ import annotations

import html as H
import re
import threading
from pathlib import Path

import browser
import numpy as np
import pytest
from golden_runs import broken, image, key, make_run
from PIL import Image

from farm import goldens as G
from farm.compare.runs import compare_run, diff_runs
from farm.plan.keys import TraceKeyError, parse_key, timeless_key
from farm.report import markdown_summary, write_report
from farm.report.images import image_relpath
from farm.report.strips import filmstrips, strip_anchor, time_text
from farm.serve.server import ReportServer, make_server

TIMES = (0, 250, 500, 750, 1000)  # as text, "1000ms" sorts before "250ms": the strip must not
WALK = [key("models/a.mdx", "Walk", t) for t in TIMES]
FAILING = WALK[2]  # the middle frame fails
LAST_NEW = WALK[4]  # no golden yet: an empty golden cell
STAND = [key("models/a.mdx", "Stand", t) for t in (0, 500)]  # a strip that passes
BIG = key("models/a.mdx", "Walk", 0, size=64)  # another size: not in the Walk strip, alone
ALONE = key("models/c.mdx", "Stand", 0)
PCT = {f"models/p.mdx|Stand|{p}|auto|32x32|msaa0|team0|transparent": ms
       for p, ms in (("10%", 100), ("100%", 1000), ("50%", 500))}  # key order is not time order


def needs_chromium(test):
    """A test in Chromium: skipped without it, and slow (a real browser process; not in make test-fast)."""
    return pytest.mark.slow(pytest.mark.skipif(browser.available() is not None, reason=browser.available() or "")(test))


def _run(tmp: Path):
    """Goldens for everything but the last Walk frame; a run whose middle Walk frame is broken."""
    frames = {k: image(i) for i, k in enumerate(WALK + STAND + list(PCT))}
    frames[BIG] = image(1, size=64)
    frames[ALONE] = image(9)
    base = make_run(tmp / "store", {k: v for k, v in frames.items() if k != LAST_NEW}, times=PCT)
    G.approve(tmp / "goldens", base, list(base.traces), by="ci")
    run = make_run(tmp / "store", {**frames, FAILING: broken(frames[FAILING])}, times=PCT)
    return run, compare_run(run, tmp / "goldens")


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("strip")
    run, results = _run(tmp)
    write_report(results, tmp / "r", image_base="https://ci.example/r/")
    return results, tmp / "r"


def strip_sections(page: str) -> dict[str, str]:
    """The page's filmstrip sections by their strip name (data-strip, unescaped)."""
    parts = page.split('<section class="filmstrip')[1:]
    return {H.unescape(re.search(r'data-strip="([^"]*)"', p).group(1)): p.split("</section>")[0] for p in parts}


def columns(section: str) -> list[dict]:
    """A strip's columns (the time row's cells) as their data-* attributes."""
    out = []
    for th in re.findall(r'<th scope="col" class="strip-col[^"]*"[^>]*>', section):
        attrs = {k: H.unescape(v) for k, v in re.findall(r'(data-[\w-]+|class)="([^"]*)"', th)}
        out.append(attrs)
    return out


def cells(section: str, row: str) -> list[str]:
    body = section.split(f'<tr class="strip-row strip-row-{row}">')[1].split("</tr>")[0]
    return re.findall(r'<td class="strip-cell.*?</td>', body)


def test_timeless_key_names_every_field_but_the_time():
    assert timeless_key(WALK[0]) == timeless_key(WALK[4]) == "models/a.mdx|Walk|*|auto|32x32|msaa0|team0|transparent"
    assert timeless_key(next(iter(PCT))) == timeless_key(list(PCT)[1])
    assert timeless_key(BIG) != timeless_key(WALK[0]) != timeless_key(STAND[0])
    assert timeless_key(WALK[0] + "|lighting=flat") != timeless_key(WALK[0])
    with pytest.raises(TraceKeyError):
        timeless_key("no|such")
    assert parse_key(WALK[0]).time_ms == 0  # the key itself is untouched


def test_strips_group_sort_and_pick_the_worst_frame(report):
    results, _ = report
    strips = filmstrips(results["traces"].values())
    by_name = {s.name: s for s in strips}
    assert set(by_name) == {timeless_key(WALK[0]), timeless_key(STAND[0]), timeless_key(next(iter(PCT)))}
    walk = by_name[timeless_key(WALK[0])]
    assert [t["key"] for t in walk.frames] == WALK  # time order, not key order
    assert [t["status"] for t in walk.frames] == ["pass", "pass", "fail", "pass", "new"]
    assert walk.failing and walk.worst == walk.selected == 2 and walk.failed == [2]
    assert strips[0] is walk  # failing strips first, like traces
    assert walk.summary() == "5 frames: 1 failed, 1 new, 3 passed; failing at 500 ms; worst: 500 ms"
    pct = by_name[timeless_key(next(iter(PCT)))]
    assert [time_text(t) for t in pct.frames] == ["10% (100 ms)", "50% (500 ms)", "100% (1000 ms)"]
    stand = by_name[timeless_key(STAND[0])]
    assert not stand.failing and stand.selected == 0  # a passing strip starts at its first frame


def test_page_shows_a_failing_filmstrip_in_time_order_with_the_worst_frame_first(report):
    results, out = report
    page = (out / "index.html").read_text()
    strips = strip_sections(page)
    assert set(strips) == {timeless_key(WALK[0]), timeless_key(STAND[0]), timeless_key(next(iter(PCT)))}
    assert list(strips)[0] == timeless_key(WALK[0])  # the failing strip first
    walk = strips[timeless_key(WALK[0])]
    head = walk.split(">", 1)[0]
    assert 'data-filmstrip="1"' in head and 'data-status="fail"' in head
    assert 'class="badge filmstrip-mark">filmstrip' in walk
    assert f'id="{strip_anchor(timeless_key(WALK[0]))}"' in head
    cols = columns(walk)
    assert [c["data-trace"] for c in cols] == WALK and [c["data-time"] for c in cols] == [f"{t} ms" for t in TIMES]
    assert [c["data-status"] for c in cols] == ["pass", "pass", "fail", "pass", "new"]
    # the worst frame is marked and selected: the big pair shows it, play starts there
    assert 'data-selected="2"' in head and 'data-worst="2"' in head
    assert [("worst" in c["class"].split()) for c in cols] == [False, False, True, False, False]
    assert [("current" in c["class"].split()) for c in cols] == [False, False, True, False, False]
    assert 'class="worst-mark"' in walk and "frame 3 of 5: 500 ms, failed (worst)" in walk
    fail = results["traces"][FAILING]
    assert f'data-row="new" src="{image_relpath(fail["png"])}"' in walk
    assert f'data-row="golden" src="{image_relpath(fail["golden"]["png"])}"' in walk
    assert "failing at 500 ms; worst: 500 ms" in walk
    # both rows aligned by time, each frame's status on it; the new trace has an empty golden cell
    for row in ("golden", "new"):
        row_cells = cells(walk, row)
        assert len(row_cells) == 5
        assert [re.search(r'data-status="(\w+)"', c).group(1) for c in row_cells] == [c["data-status"] for c in cols]
        assert all(re.search(r'<span class="badge status-\w+">', c) for c in row_cells)
    assert "no golden" in cells(walk, "golden")[4] and "status-new" in cells(walk, "golden")[4]
    assert "no golden" not in "".join(cells(walk, "golden")[:4])
    # the approve command of the strip's failed frames (each card keeps its own)
    assert "approve this strip's failed frames" in walk and f"--trace &#39;{FAILING}&#39; --out" in walk
    assert walk.count("--trace") == 1
    # passing strips: no worst mark, folded like passed cards; traces alone or of another size: no strip
    stand = strips[timeless_key(STAND[0])]
    assert 'data-worst=""' in stand and 'data-collapsed="1"' in stand.split(">", 1)[0] and "worst-mark" not in stand
    pct = strips[timeless_key(next(iter(PCT)))]
    assert [c["data-time"] for c in columns(pct)] == ["10% (100 ms)", "50% (500 ms)", "100% (1000 ms)"]
    assert BIG not in "".join(strips.values()) and ALONE not in "".join(strips.values())
    # every trace still has its own card (approve commands reachable), the list is unchanged
    assert page.count('<section class="trace') == len(results["traces"])
    assert page.count('<tr class="row') == len(results["traces"])


def test_summary_links_each_failing_strip(report, tmp_path):
    results, out = report
    md = (out / "summary.md").read_text()
    anchor = strip_anchor(timeless_key(WALK[0]))
    lines = [ln for ln in md.splitlines() if "filmstrip" in ln and ln.startswith("- ")]
    assert len(lines) == 1  # the failing strip only
    assert f"](https://ci.example/r/index.html#{anchor})" in lines[0]
    assert lines[0].startswith("- fail: filmstrip [<code>models/a.mdx&#124;Walk&#124;&#42;&#124;")
    assert "failing at 500 ms; worst: 500 ms" in lines[0]
    assert "### Failing filmstrips (1)" in md and md.index("### Failing filmstrips") < md.index("### Worst differences")
    assert f'id="{anchor}"' in (out / "index.html").read_text()  # the link lands on the strip
    # an explicit report URL: the anchor on it
    md = markdown_summary(results, report_url="https://ci/job/7/report.html")
    assert f"](https://ci/job/7/report.html#{anchor})" in md
    # nothing published: no link, the anchor as text, no image or link syntax at all
    md = markdown_summary(results)
    line = next(ln for ln in md.splitlines() if ln.startswith("- fail: filmstrip"))
    assert "](" not in md and f"<code>#{anchor}</code>" in line


def test_summary_bound_cuts_filmstrip_lines_before_the_tables(tmp_path):
    traces = {}
    for m in range(400):
        for t in (0, 100):
            k = key(f"models/m{m:04d}_with_a_rather_long_path_name/unit.mdx", "Stand", t)
            traces[k] = {"key": k, "status": "fail" if t else "pass", "model": k.split("|")[0], "time_ms": t,
                         "metrics": {"ssim": 0.5, "pixels_over": 0.1, "max_diff": 9}}
    results = {"kind": "goldens", "job": "big", "store": str(tmp_path), "goldens": str(tmp_path), "traces": traces,
               "counts": {"fail": 400, "pass": 400, "total": 800}, "compared": 800, "verdict": "fail"}
    md = markdown_summary(results, image_base="https://ci/r/", max_chars=20000)
    assert len(md) <= 20000
    assert "### Worst differences (10 of 400)" in md  # the table is whole
    assert re.search(r"### Failing filmstrips \(\d+ of 400\)", md)
    assert re.search(r"_\d+ trace\(s\) and \d+ filmstrip\(s\) not shown: this summary is cut at 20,000", md)


def test_strip_names_from_model_files_stay_text(tmp_path):
    evil = "<img src=x onerror=alert(1)>[x](javascript:1)"
    ks = [key("models/e.mdx", evil, t) for t in (0, 100)]
    run = make_run(tmp_path / "store", {k: image(i) for i, k in enumerate(ks)})
    results = compare_run(run, tmp_path / "goldens")
    results["traces"][ks[1]]["status"] = "fail"  # a failing strip, so that summary.md lists it
    write_report(results, tmp_path / "r", report_url="https://ci/r.html")
    page = (tmp_path / "r" / "index.html").read_text()
    assert len(strip_sections(page)) == 1 and evil not in page and H.escape(evil, quote=True) in page
    md = (tmp_path / "r" / "summary.md").read_text()
    line = next(ln for ln in md.splitlines() if ln.startswith("- fail: filmstrip"))
    assert "<img" not in line and "[x]" not in line and "&#91;x&#93;&#40;javascript:1&#41;" in line


def test_a_diff_groups_base_and_head_frames(tmp_path):
    ks = [key(t=t) for t in (0, 100, 200)]
    base = make_run(tmp_path / "s", {ks[0]: image(1), ks[1]: image(2)})
    head = make_run(tmp_path / "s", {ks[0]: image(1), ks[1]: broken(image(2)), ks[2]: image(4)})
    write_report(diff_runs(base, head), tmp_path / "r", report_url="https://ci/r.html")
    (section,) = strip_sections((tmp_path / "r" / "index.html").read_text()).values()
    assert [c["data-status"] for c in columns(section)] == ["unchanged", "changed", "added"]
    assert 'data-selected="1"' in section and '<th scope="row">base</th>' in section and "farm approve" not in section
    md = (tmp_path / "r" / "summary.md").read_text()
    assert "### Filmstrips with changes (1): where in time they change" in md and "changed at 100 ms" in md


# --- headless Chromium

STATE = """
const s = document.querySelector(arguments[0]);
const cur = row => Array.from(s.querySelectorAll(row)).filter(c => c.classList.contains('current'))
  .map(c => Number(c.dataset.index));
const big = row => { const i = s.querySelector('img.strip-big-img[data-row=' + row + ']');
  return i.hidden ? null : i.getAttribute('src'); };
return {selected: Number(s.dataset.selected), golden: big('golden'), new: big('new'),
        goldenCells: cur('.strip-row-golden td'), newCells: cur('.strip-row-new td'), cols: cur('th.strip-col'),
        now: s.querySelector('.strip-now').textContent, playing: s.dataset.playing === '1'};
"""
COLUMN = "return document.querySelectorAll(arguments[0] + ' th.strip-col')[arguments[1]].getAttribute(arguments[2])"


def _shot(b, path: Path) -> np.ndarray:
    b.screenshot(str(path))
    return np.asarray(Image.open(path).convert("RGB"))


@needs_chromium
def test_chromium_play_flips_both_rows_in_step(report, tmp_path):
    _, out = report
    strip = "#" + strip_anchor(timeless_key(WALK[0]))
    with browser.Browser() as b:
        b.get((out / "index.html").as_uri())
        b.wait_for("return document.body.dataset.ready === '1'")
        b.run("document.querySelector(arguments[0]).scrollIntoView(); return 1", strip)
        b.wait_for("return Array.from(document.querySelectorAll(arguments[0] + ' img:not([hidden])'))"
                   ".every(i => i.complete && i.naturalWidth > 0)", strip)
        first = b.run(STATE, strip)
        assert first["selected"] == 2 and first["goldenCells"] == first["newCells"] == first["cols"] == [2]
        assert first["new"] == b.run(COLUMN, strip, 2, "data-new-src") and first["golden"] is not None
        assert first["now"] == "frame 3 of 5: 500 ms, failed (worst)"
        shots = [_shot(b, tmp_path / "worst.png")]
        assert shots[0].reshape(-1, 3).std(axis=0).max() > 10  # not a blank page
        b.click(b.find(f"{strip} button.strip-play"))
        seen = [first["selected"]]
        for _ in range(3):  # 3, 4 (no golden yet), then round to 0
            b.wait_for("return Number(document.querySelector(arguments[0]).dataset.selected) !== arguments[1]",
                       strip, seen[-1])
            st = b.run(STATE, strip)
            i = st["selected"]
            assert st["playing"] and st["goldenCells"] == st["newCells"] == st["cols"] == [i]  # in step
            assert st["new"] == b.run(COLUMN, strip, i, "data-new-src")
            assert st["golden"] == b.run(COLUMN, strip, i, "data-golden-src")  # None: the new trace's empty cell
            assert st["now"].startswith(f"frame {i + 1} of 5: {TIMES[i]} ms, ")
            seen.append(i)
        assert seen == [2, 3, 4, 0]
        b.click(b.find(f"{strip} button.strip-play"))  # pause
        st = b.run(STATE, strip)
        assert not st["playing"]
        b.wait_for("return Array.from(document.querySelectorAll(arguments[0] + ' img:not([hidden])'))"
                   ".every(i => i.complete && i.naturalWidth > 0)", strip)
        shots.append(_shot(b, tmp_path / "paused.png"))
        assert b.run(STATE, strip)["selected"] == st["selected"]  # stays where it paused
        assert shots[0].tobytes() != shots[1].tobytes()  # the big pair shows another frame
        # the worst-frame button, a click on a cell, a column's link opens that trace's card
        b.click(b.find(f"{strip} button.strip-worst"))
        assert b.run(STATE, strip)["selected"] == 2
        b.click(b.find(f"{strip} .strip-row-golden td[data-index='1']"))
        assert b.run(STATE, strip)["newCells"] == [1]
        b.click(b.find(f"{strip} th.strip-col[data-index='0'] a.strip-card"))
        card = f'section.trace[data-key="{WALK[0]}"]'
        b.wait_for("return document.querySelector(arguments[0]).classList.contains('focused')", card)
        assert b.run("return document.querySelector(arguments[0]).dataset.collapsed === undefined", card)
        # filters hide a strip with none of the wanted statuses
        b.click(b.find("#status-filter input[value=pass]"))
        hidden = "return document.querySelector(arguments[0]).hidden"
        assert b.run(hidden, "#" + strip_anchor(timeless_key(STAND[0]))) and not b.run(hidden, strip)
        assert b.severe_logs() == []


@needs_chromium
def test_chromium_serve_approves_a_strips_failed_frames(tmp_path):
    run, _ = _run(tmp_path)
    state = ReportServer(run, tmp_path / "goldens", by="Strip Tester")
    server = make_server(state, "127.0.0.1", 0)
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
    strip = "#" + strip_anchor(timeless_key(WALK[0]))
    try:
        with browser.Browser() as b:
            b.get(f"http://127.0.0.1:{server.server_address[1]}/")
            b.wait_for("return document.body.dataset.ready === '1'")
            assert b.run("return document.querySelector(arguments[0] + ' button.strip-approve').textContent",
                         strip) == "Approve this strip's failed frames (1)"
            b.click(b.find(f"{strip} button.strip-approve"))
            b.wait_for("return document.querySelector(arguments[0] + ' .strip-result').textContent"
                       ".includes('1 trace(s) approved')", strip)
            cell = f"{strip} .strip-row-new td[data-index='2']"
            assert b.run("return document.querySelector(arguments[0]).dataset.status", cell) == "pass"
            assert b.run("return document.querySelector(arguments[0] + ' .badge').textContent", cell) == "passed"
            assert b.run("return document.querySelector(arguments[0]).dataset.status",
                         f'#trace-list tr.row[data-key="{FAILING}"]') == "pass"
            assert b.severe_logs() == []
    finally:
        server.shutdown()
        server.server_close()
        state.close()
    assert FAILING in G.GoldenIndex.load(tmp_path / "goldens").traces()
