"""A report cut into pages, so it opens at any size.

The landing page (``index.html``) is page 1: the verdict, the counts, the problems, then the first
`PAGE_CARDS` trace cards in report order (failures first, `farm.report.model.sort_traces`) and the
first filmstrips (failing first) up to `PAGE_STRIP_FRAMES` frames. The other cards and filmstrips
are on ``pages/2.html``, ``pages/3.html``, ... in the same order, each the same page with a pager.
A report that fits one page is one page, as before.

Every trace is reachable from every page without loading the others: the compact rows of all
traces (key, status, model, page, anchor, SSIM, pixels off) are in small script files,
``pages/rows-1.js`` ... (`ROWS_PER_FILE` rows each, each calling ``farmRows(n, rows)``), which the
page's script (static/pages.js) loads one after another only when a search or a filter asks, and
stops at `MATCH_LIMIT` matches. Script files rather than JSON, because a page opened from disk
(file://) may load a script of its own folder (CSP ``script-src 'self'``) but not fetch a file.
The rows are JSON inside the script, so a hostile key is a string, never code or markup.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field

from farm.compare.status import LABELS
from farm.report.model import compact_cells

__all__ = ["MATCH_LIMIT", "PAGE_CARDS", "PAGE_STRIP_FRAMES", "ROWS_PER_FILE", "Page", "page_url", "plan_pages",
           "row_files"]

PAGE_CARDS = 200  # trace cards on one page
PAGE_STRIP_FRAMES = 300  # filmstrip frames on one page (at least one strip a page)
ROWS_PER_FILE = 5000  # compact rows in one pages/rows-N.js
MATCH_LIMIT = 500  # rows a search shows at most (static/pages.js reads it from the page)


@dataclass
class Page:
    number: int  # 1 is the landing page
    traces: list = field(default_factory=list)  # the results' trace dicts of its cards, in report order
    strips: list = field(default_factory=list)  # its farm.report.strips.FilmStrip objects


def page_url(number: int, here: int = 1) -> str:
    """The URL of page `number` from page `here` (index.html is page 1, the others are in pages/)."""
    if number == 1:
        return "index.html" if here == 1 else "../index.html"
    return f"pages/{number}.html" if here == 1 else f"{number}.html"


def plan_pages(order: list[dict], strips: list) -> list[Page]:
    """The pages of a report: `order` (the traces in report order) `PAGE_CARDS` a page, `strips`
    (failing first, as farm.report.strips orders them) up to `PAGE_STRIP_FRAMES` frames a page."""
    pages = [Page(i // PAGE_CARDS + 1, order[i:i + PAGE_CARDS]) for i in range(0, len(order), PAGE_CARDS)]
    pages = pages or [Page(1)]
    n, frames = 0, 0
    for strip in sorted(strips, key=lambda s: not s.failing):
        if frames and frames + len(strip.frames) > PAGE_STRIP_FRAMES:
            n, frames = n + 1, 0
        if n >= len(pages):
            pages.append(Page(n + 1))
        pages[n].strips.append(strip)
        frames += len(strip.frames)
    return pages


def row_files(pages: list[Page], anchor) -> Iterator[tuple[int, str]]:
    """(n, text of pages/rows-n.js) for every `ROWS_PER_FILE` rows of the traces, in report order."""
    rows: list[list] = []
    n = 0
    for page in pages:
        for t in page.traces:
            cells = compact_cells(t)
            rows.append([t["key"], t["status"], LABELS.get(t["status"], t["status"]), t.get("model") or "",
                         page.number, anchor(t["key"]), cells["ssim"], cells["over"]])
            if len(rows) == ROWS_PER_FILE:
                n += 1
                yield n, _script(n, rows)
                rows = []
    if rows:
        yield n + 1, _script(n + 1, rows)


def _script(n: int, rows: list[list]) -> str:
    # ensure_ascii: U+2028/U+2029 and every other non-ASCII character as an escape, so the JSON is a
    # JavaScript literal whatever a key holds; <, > and & as escapes too (they occur only inside strings),
    # so the file holds nothing an HTML parser would read as markup.
    text = json.dumps(rows, ensure_ascii=True, separators=(",", ":"))
    text = text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
    return f"farmRows({n}, {text});\n"
