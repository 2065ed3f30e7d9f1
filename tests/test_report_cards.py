"""farm.report.cards writes a trace's card and list row as the page template wrote them (tests/data/
report_cards.html.j2: the template's markup for them before, rendered here by the report's own Jinja
environment): the same bytes for every combination of what a card shows, hostile names included."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest
from markupsafe import Markup

from farm.report.cards import card_html, row_html, strip_cells_html, strip_heads_html
from farm.report.html import _env

REFERENCE = (Path(__file__).parent / "data" / "report_cards.html.j2").read_text("utf-8")
ROWS, CARDS = REFERENCE.split("{# cards #}\n")
CARDS, STRIPS = CARDS.split("{# heads #}\n")

HOSTILE = 'models/<b>"x"</b>&\'y\'.mdx|St\x1band\u202e|0ms|auto|8x8'


def _view(i: int, flags: tuple) -> dict:
    blank, missing, note, reason, golden, diff_src, metrics, facts, commands, decide, collapsed, similar = flags
    key = f"{HOSTILE}|{i}"
    return {
        "key": key, "anchor": f"t-{i:012x}", "model": 'models/<b>"x"</b>&.mdx', "status": "fail" if i % 2 else "pass",
        "group": "failed" if i % 2 else "passed", "label": "failed <&>" if i % 2 else "passed",
        "match": "similar" if similar else "exact", "reason": "it <differs> & \x07 bells" if reason else None,
        "new_src": None if i % 5 == 4 else f"img/ab/{i}<.png", "golden_src": "img/cd/g&.png" if golden else None,
        "diff_src": "img/ef/d\".png" if diff_src else None, "ssim_src": "img/ef/s'.png" if diff_src else None,
        "w": 8, "h": 8, "dims": Markup('width="8" height="8" data-w="8" data-h="8"'),
        "metrics": [{"name": "SSIM <min>", "value": "0.5", "limit": ">= 0.99", "ok": False},
                    {"name": "alpha", "value": "1", "limit": "", "ok": None},
                    {"name": "over", "value": "0%", "limit": "<= 0.1%", "ok": True}] if metrics else [],
        "limits": "min_ssim >= 0.99 & <none>",
        "facts": [("rendered <by>", "llvm & \x1b[31m"), ("n", 3)] if facts else [],
        "commands": [("approve", "farm approve a --trace '<k>'"), ("reject", "farm reject a")] if commands else [],
        "can_decide": decide, "blank": "all one colour <0,0,0,0>" if blank else None,
        "missing": ["tex<1>.blp", "a&b\x1b.blp"] if missing else [], "golden_note": "golden <drawn> & blank" if note
        else None, "collapsed": collapsed, "ssim": "0.5000", "over": "1.00%",
    }


def _views() -> list[dict]:
    combos = list(itertools.product((False, True), repeat=12))
    return [_view(i, flags) for i, flags in enumerate(combos[::7] + [combos[0], combos[-1]])]


@pytest.mark.parametrize("serve,diff", [(None, False), ({"token": "t"}, False), ({"token": "t"}, True), ({}, False)])
def test_rows_and_cards_are_the_template_bytes(serve, diff):
    views = _views()
    labels = ("head", "base") if diff else ("new", "golden")
    env = _env()
    want_rows = env.from_string(ROWS).render(views=views, serve=serve, diff=diff)
    want_cards = env.from_string(CARDS).render(views=views, serve=serve, diff=diff, new_label=labels[0],
                                               golden_label=labels[1])
    pick = bool(serve) and not diff
    assert "".join(row_html(v, pick) for v in views) == want_rows
    assert "".join(card_html(v, *labels) for v in views) == want_cards
    assert "&lt;b&gt;" in want_cards and "\\x1b" in want_cards and "<b>" not in want_cards  # escaped, shown


HEADS, CELLS = STRIPS.split("{# cells #}\n")


def _frame(i: int, flags: tuple) -> dict:
    worst, current, golden, new, diff_src, approvable = flags
    return {"index": i, "key": f"{HOSTILE}|{i}", "anchor": f"t-{i:012x}", "status": "fail" if i % 3 else "pass",
            "label": "failed <&>", "time": f"{20 * i} ms \x1b", "new_src": f"img/ab/{i}&.png" if new else None,
            "golden_src": "img/cd/\"g\".png" if golden else None, "diff_src": "img/ef/<d>.png" if diff_src else None,
            "ssim": "0.5000" if i % 2 else "-", "worst": worst, "current": current, "approvable": approvable}


@pytest.mark.parametrize("labels", [("golden", "new"), ("base", "head")])
def test_filmstrip_rows_are_the_template_bytes(labels):
    frames = [_frame(i, flags) for i, flags in enumerate(itertools.product((False, True), repeat=6))]
    env = _env()
    assert strip_heads_html(frames) == env.from_string(HEADS).render(s={"frames": frames})
    for row, label in zip(("golden", "new"), labels, strict=True):
        want = env.from_string(CELLS).render(s={"frames": frames}, row=row, label=label)
        assert strip_cells_html(frames, row, label) == want
        assert ("&#34;g&#34;" in want) == (row == "golden") and "\\x1b" in want  # escaped, shown
