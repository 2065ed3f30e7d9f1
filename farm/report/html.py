"""The HTML report: failures first, then new traces, then passed ones, in pages of a few hundred
cards when there are more (farm.report.pages: the landing page is index.html).

For each trace: the new frame, its golden, the difference heatmap and the SSIM map, in four views
(side by side; swap on hover; a slider; onion skin), the metrics with the thresholds they were held
against, what rendered each image, and the exact command that approves (or rejects) it. Filters by
status and by model. Before the cards, the filmstrips (farm.report.strips): the traces of one model,
sequence, camera and size across timestamps, a golden row and a new row in time order, each frame's
status, the selected frame (the worst first when the strip fails) large above them, and a play
button (report.js) that flips through both rows in step. Everything is local: the images are put
into img/ab/ (farm.report.images), the scripts and style into static/, and a Content-Security-Policy
forbids anything else
(no inline script, no network).

Strings from model files (sequence names in trace keys, model paths) reach the page only through
Jinja2 with autoescape on, as text or attribute values; the script reads them back from data-*
attributes, never from markup it builds.
"""

from __future__ import annotations

import functools
import hashlib
from pathlib import Path

from jinja2 import Environment, FileSystemLoader
from markupsafe import Markup

from farm.compare.metrics import thresholds_text
from farm.compare.status import LABELS, REPORT_ORDER, group_of
from farm.escape import html_finalize
from farm.files import atomic_write, json_wide_chunks, write_chunks
from farm.report.cards import card_html, row_html, strip_cells_html, strip_heads_html
from farm.report.images import ReportImages, heatmap_relpath, image_relpath
from farm.report.junit import write_junit
from farm.report.markdown import markdown_summary
from farm.report.model import approve_command, compact_cells, counts_view, metric_rows, report_order
from farm.report.pages import MATCH_LIMIT, Page, page_url, plan_pages, row_files
from farm.report.published import report_origin
from farm.report.strips import FilmStrip, filmstrips, time_text
from farm.store import open_store

__all__ = ["build_strip_views", "build_views", "render_html", "render_nightly_index", "write_report"]

HERE = Path(__file__).resolve().parent
TEMPLATES = HERE / "templates"
STATIC = HERE / "static"
MAX_MODEL_OPTIONS = 1000  # more models than this: no model menu (the search finds a model's traces)


class _Templates(Environment):
    """Jinja2 with `a.b` on a dict read as ``a["b"]`` first: every card and row of the report is a dict,
    and Jinja's own order (the attribute first, the failed lookup raising) was a third of a card's cost.
    The templates name no dict method as a field, so what they print is the same."""

    def getattr(self, obj, attribute):
        if type(obj) is dict:
            try:
                return obj[attribute]
            except KeyError:
                pass
        return super().getattr(obj, attribute)


@functools.cache
def _env() -> Environment:
    """The report's templates, compiled once per process (not once per page: at 200 cards a page,
    compiling them again was about a millisecond a trace)."""
    env = _Templates(loader=FileSystemLoader(str(TEMPLATES)), autoescape=True, trim_blocks=True,
                      lstrip_blocks=True, keep_trailing_newline=True, finalize=html_finalize)
    env.filters["pct"] = lambda v: "-" if v is None else f"{100 * v:.3f}%"
    env.filters["num"] = lambda v, d=6: "-" if v is None else f"{v:.{d}f}"
    return env


def _anchor(key: str) -> str:
    """A trace card's anchor (a filmstrip's: farm.report.strips.strip_anchor)."""
    return "t-" + hashlib.sha256(key.encode("utf-8")).hexdigest()[:12]


class _Sources:
    """Puts a trace's images into the report folder (`ReportImages`) and gives their URLs: the new frame,
    its golden (or a diff's base frame), the difference heatmap and the SSIM map."""

    def __init__(self, results: dict, out: Path, prefix: str, placed: set[str] | None):
        self.images = ReportImages(out, prefix, placed)
        self.diff = results.get("kind") == "diff"
        self.store = open_store(results["store"])
        self.head = open_store(results["head"]["store"]) if self.diff else self.store
        self.base = open_store(results["base"]["store"]) if self.diff else None

    def frames(self, t: dict) -> tuple[str | None, str | None, str | None]:
        """(new frame, golden, difference heatmap) URLs of trace `t`."""
        images, g = self.images, t.get("golden") or {}
        new_src = images.add_ref(self.head, self.head.image_ref(t["png"]), image_relpath(t["png"])) \
            if t.get("png") else None
        golden_src = None
        if g.get("path"):  # a golden: a file in the goldens folder
            golden_src = images.add(g["path"], image_relpath(g["png"]))
        elif g.get("ref") and self.base is not None:  # a diff's base frame: in the base run's store
            golden_src = images.add_ref(self.base, g["ref"], image_relpath(g["png"]))
        diff_src = images.add_ref(self.store, t.get("diff_image"), heatmap_relpath(t["diff_image"])) \
            if t.get("diff_image") else None
        return new_src, golden_src, diff_src

    def ssim(self, t: dict) -> str | None:
        return self.images.add_ref(self.store, t.get("ssim_image"), heatmap_relpath(t["ssim_image"])) \
            if t.get("ssim_image") else None


def _facts(t: dict, diff: bool, head_store) -> list[tuple[str, str]]:
    """The card's facts: what rendered each image, the golden and who approved it, digests."""
    g = t.get("golden") or {}
    facts = []
    if t.get("env"):
        facts.append(("this frame rendered by", t["env"]))
    if g:
        if diff:
            facts.append(("base frame rendered by", g.get("env")))
            facts.append(("base run", g.get("run")))
        else:
            scope = "this environment's own golden" if g.get("scope") == "env" else "generic golden"
            facts.append(("golden", f"{g['digest'][:16]}... ({scope})"))
            facts.append(("golden rendered by", g.get("env")))
            facts.append(("approved by", f"{g.get('by')} on {g.get('at')} (run {g.get('run')})"))
    if t.get("rejected"):
        r = t["rejected"]
        facts.append(("rejected by", f"{r.get('by')} on {r.get('at')} (run {r.get('run')})"))
    if t.get("digest"):
        facts.append(("pixel digest", t["digest"]))
    if t.get("png"):
        facts.append(("stored as", head_store.image_ref(t["png"])))
    return facts


def _approvable(t: dict, diff: bool) -> bool:
    """Whether a card offers the approve command (`_commands`)."""
    return (not diff and t["status"] != "error" and bool(t.get("png"))
            and (t["status"] != "pass" or t.get("match") != "exact"))


def _commands(results: dict, t: dict, diff: bool) -> list[tuple[str, str]]:
    commands = []
    if not diff and t["status"] != "error" and t.get("png"):
        if _approvable(t, diff):
            commands.append(("approve", approve_command(results, "approve", t["key"])))
        commands.append(("reject", approve_command(results, "reject", t["key"])))
    return commands


def _can_decide(t: dict, serve: dict | None, diff: bool) -> bool:
    return serve is not None and not diff and bool(t.get("png")) and t["status"] != "error"


def build_views(results: dict, out: Path, serve: dict | None = None, traces: list[dict] | None = None,
                prefix: str = "", placed: set[str] | None = None) -> list[dict]:
    """The cards of `traces` (default: every trace, in `sort_traces` order), their images put into the
    report folder `out` (`placed`: the images already there, `ReportImages`); image URLs start with
    `prefix` (a page in pages/: "../")."""
    src = _Sources(results, out, prefix, placed)
    diff = src.diff
    views = []
    for t in report_order(results["traces"]) if traces is None else traces:
        new_src, golden_src, diff_src = src.frames(t)
        size = t.get("size") or (t.get("metrics") or {}).get("golden_size") or [128, 128]
        rows = metric_rows(t)
        views.append({
            "key": t["key"], "anchor": _anchor(t["key"]), "model": t.get("model") or "", "status": t["status"],
            "group": group_of(t["status"]), "label": LABELS.get(t["status"], t["status"]),
            "match": t.get("match"), "reason": t.get("reason"), "new_src": new_src, "golden_src": golden_src,
            "diff_src": diff_src, "ssim_src": src.ssim(t), "w": int(size[0]), "h": int(size[1]), "dims": _dims(size),
            "metrics": rows, "limits": None if rows else thresholds_text(t.get("thresholds")),  # shown without rows
            "facts": _facts(t, diff, src.head), "commands": _commands(results, t, diff),
            "can_decide": _can_decide(t, serve, diff), "blank": t.get("blank"),
            "missing": list(t.get("missing") or []), "golden_note": t.get("golden_note"),
            "collapsed": group_of(t["status"]) == "passed",
            **compact_cells(t),
        })
    return views


def build_frame_views(results: dict, out: Path, serve: dict | None, traces: list[dict], prefix: str = "",
                      placed: set[str] | None = None) -> list[dict]:
    """What a filmstrip shows of each of `traces` (`_strip_frame`; a card's view holds it too): its
    images, size and SSIM, whether it can be approved; the rest of a card (facts, commands, metric
    rows) is not made, since most of a strip's frames have their cards on other pages."""
    src = _Sources(results, out, prefix, placed)
    views = []
    for t in traces:
        new_src, golden_src, diff_src = src.frames(t)
        size = t.get("size") or (t.get("metrics") or {}).get("golden_size") or [128, 128]
        views.append({"key": t["key"], "anchor": _anchor(t["key"]), "new_src": new_src, "golden_src": golden_src,
                      "diff_src": diff_src, "w": int(size[0]), "h": int(size[1]), "ssim": compact_cells(t)["ssim"],
                      "approves": _approvable(t, src.diff), "can_decide": _can_decide(t, serve, src.diff)})
    return views


def _dims(size) -> Markup:
    """An image's size attributes, written once a card (ten images show it; numbers only)."""
    w, h = int(size[0]), int(size[1])
    return Markup(f'width="{w}" height="{h}" data-w="{w}" data-h="{h}"')


def _strip_frame(strip: FilmStrip, i: int, v: dict) -> dict:
    t = strip.frames[i]
    return {"index": i, "key": t["key"], "anchor": v.get("anchor") or _anchor(t["key"]), "status": t["status"],
            "label": LABELS.get(t["status"], t["status"]), "time": time_text(t), "new_src": v.get("new_src"),
            "golden_src": v.get("golden_src"), "diff_src": v.get("diff_src"), "ssim": v.get("ssim", "-"),
            "worst": strip.failing and i == strip.worst, "current": i == strip.selected,
            "approvable": group_of(t["status"]) == "failed" and _approves(v)}


def _approves(v: dict) -> bool:
    """Whether a card's or a frame's view (build_views, build_frame_views) offers the approve command."""
    if "approves" in v:
        return v["approves"]
    return any(verb == "approve" for verb, _ in v.get("commands") or ())


def build_strip_views(results: dict, views: list[dict], serve: dict | None = None,
                      strips: list[FilmStrip] | None = None) -> list[dict]:
    """The filmstrips of the page (farm.report.strips; `strips`, default all of them), each frame with its
    view's images and status."""
    by_key = {v["key"]: v for v in views}
    labels = (("golden", "base"), ("new", "head")) if results.get("kind") == "diff" else (("golden", "golden"),
                                                                                          ("new", "new"))
    out = []
    for strip in filmstrips(results["traces"]) if strips is None else strips:
        frames = [_strip_frame(strip, i, by_key.get(t["key"], {})) for i, t in enumerate(strip.frames)]
        keys = [f["key"] for f in frames if f["approvable"]]
        first = by_key.get(strip.frames[0]["key"], {})
        out.append({
            "name": strip.name, "anchor": strip.anchor, "model": strip.model, "status": strip.status,
            "label": LABELS.get(strip.status, strip.status), "group": group_of(strip.status),
            "statuses": " ".join(dict.fromkeys(f["status"] for f in frames)), "failing": strip.failing,
            "worst": strip.worst, "selected": frames[strip.selected], "frames": frames, "summary": strip.summary(),
            "w": first.get("w", 128), "h": first.get("h", 128), "collapsed": group_of(strip.status) == "passed",
            "approve": approve_command(results, extra=tuple(x for k in keys for x in ("--trace", k))) if keys
            else None, "can_decide": serve is not None and any(by_key[k].get("can_decide") for k in keys),
            "approvable": len(keys), "heads": Markup(strip_heads_html(frames)),
            "cells": {row: Markup(strip_cells_html(frames, row, label)) for row, label in labels},
        })
    return out


def _pager(number: int, count: int) -> list[tuple[str, str | None]]:
    """The pager's links of page `number` of `count`: (text, URL or None for this page / a gap)."""
    near = sorted({1, count, *range(max(1, number - 3), min(count, number + 3) + 1)})
    links: list[tuple[str, str | None]] = []
    if number > 1:
        links.append(("previous", page_url(number - 1, number)))
    last = 0
    for n in near:
        if n > last + 1:
            links.append(("…", None))
        links.append((str(n), None if n == number else page_url(n, number)))
        last = n
    if number < count:
        links.append(("next", page_url(number + 1, number)))
    return links


def render_html(results: dict, views: list[dict], serve: dict | None = None, page: dict | None = None) -> str:
    """A page of the report: `views` are its cards; `page` (write_report's) says which page of how
    many, its filmstrips, the models and the number of row files; without it, the whole report."""
    diff = results.get("kind") == "diff"
    counts = results.get("counts", {})
    statuses = [s for s in REPORT_ORDER if counts.get(s)]
    page = page or {}
    number, count = page.get("number", 1), page.get("count", 1)
    models = page["models"] if "models" in page else sorted({v["model"] for v in views})
    title = (f"modelfarm diff: {results['base']['job']} -> {results['head']['job']}" if diff
             else f"modelfarm: {results['job']}")
    strips = page["strips"] if "strips" in page else build_strip_views(results, views, serve)
    max_side = max([max(v["w"], v["h"]) for v in views] + [max(s["w"], s["h"]) for s in strips] or [128])
    new_label, golden_label = ("head", "base") if diff else ("new", "golden")
    pick = bool(serve) and not diff
    return _env().get_template("report.html.j2").render(
        rows=Markup("".join(row_html(v, pick) for v in views)),
        cards=Markup("".join(card_html(v, new_label, golden_label) for v in views)),
        strips=strips, failing_strips=sum(1 for s in strips if s["failing"]),
        title=title if count == 1 else f"{title} (page {number} of {count})", results=results, views=views,
        diff=diff, counts=counts, statuses=statuses, head=page["head"] if "head" in page else counts_view(results),
        labels=LABELS, models=models, serve=serve, zoom=2 if max_side <= 160 else 1,
        new_label=new_label, golden_label=golden_label,
        root="" if number == 1 else "../", page_number=number, page_count=count,
        pager=_pager(number, count) if count > 1 else [], row_files=page.get("row_files", 0),
        match_limit=MATCH_LIMIT, total=counts.get("total", len(views)),
    )


def _write_page(results: dict, out: Path, page: Page, count: int, serve: dict | None, extra: dict) -> list[dict]:
    """Write one page (its cards' and filmstrips' images first); returns its views."""
    prefix, placed = "" if page.number == 1 else "../", extra["placed"]
    views = build_views(results, out, serve, page.traces, prefix, placed)
    strip_traces = [t for s in page.strips for t in s.frames]
    strip_views = build_frame_views(results, out, serve, strip_traces, prefix, placed) if strip_traces else []
    strips = build_strip_views(results, strip_views, serve, page.strips)
    html = render_html(results, views, serve, {"number": page.number, "count": count, "strips": strips,
                                               **{k: v for k, v in extra.items() if k != "placed"}})
    atomic_write(out / page_url(page.number), html.encode("utf-8"))
    return views


def _clear_pages(out: Path, count: int) -> None:
    """Remove the pages and row files an earlier, larger report left in pages/."""
    folder = out / "pages"
    for f in folder.glob("*") if folder.is_dir() else ():
        stem = f.name.split(".", 1)[0].removeprefix("rows-")
        if f.suffix in (".html", ".js") and stem.isdigit() and int(stem) > (count if f.suffix == ".html" else -1):
            f.unlink(missing_ok=True)


def _markdown_views(results: dict, out: Path, order: list[dict], first: list[dict], limit: int) -> list[dict]:
    """The views summary.md links images of: the landing page's, and the first `limit` new traces."""
    have = {v["key"] for v in first}
    fresh = [t for t in order if group_of(t["status"]) == "new" and t["key"] not in have][:limit]
    return first + (build_views(results, out, None, fresh) if fresh else [])


def write_report(results: dict, out_dir: str | Path, *, serve: dict | None = None, image_base: str | None = None,
                 markdown_limit: int = 10, report_url: str | None = None) -> dict[str, Path]:
    """Write the report folder (see farm.report; its pages: farm.report.pages); returns the paths of what
    it wrote."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    (out / "static").mkdir(exist_ok=True)
    for f in STATIC.iterdir():
        if f.is_file():
            atomic_write(out / "static" / f.name, f.read_bytes())
    results = {**results, "origin": report_origin(results, out, report_url)}  # for farm approve REPORT
    order = report_order(results["traces"])  # read a trace at a time: farm.compare.table
    strips = filmstrips(results["traces"])
    pages = plan_pages(order, strips)
    _clear_pages(out, len(pages))
    files = 0
    if len(pages) > 1:
        for n, text in row_files(pages, _anchor):
            atomic_write(out / "pages" / f"rows-{n}.js", text.encode("ascii"))
            files = n
    models = sorted({t.get("model") or "" for t in order})
    extra = {"models": models if len(models) <= MAX_MODEL_OPTIONS else [], "row_files": files,
             "head": counts_view(results), "placed": set()}  # once: it walks every trace, and every page shows it
    first: list[dict] = []
    for page in pages:
        views = _write_page(results, out, page, len(pages), serve, extra)
        first = views if page.number == 1 else first
    paths = {"html": out / "index.html", "junit": out / "junit.xml", "markdown": out / "summary.md",
             "results": out / "results.json"}
    write_junit(paths["junit"], results, out)
    md_views = _markdown_views(results, out, order, first, markdown_limit)
    atomic_write(paths["markdown"], markdown_summary(results, md_views, image_base=image_base, limit=markdown_limit,
                                                     report_url=report_url, strips=strips,
                                                     in_order=order).encode("utf-8"))
    write_chunks(paths["results"], json_wide_chunks(results, "traces"))
    return paths


def render_nightly_index(history: list[dict], trend_nights: int = 60) -> str:
    """The nightly index page (farm.flows.nightly.write_index): `history` (oldest first, one entry per
    date: date, status, counts, job, report) newest first, a trend strip and pass rates."""
    nights = []
    for h in reversed(history):
        counts = h.get("counts") or {}
        text = ", ".join(f"{counts[k]} {LABELS.get(k, k)}" for k in REPORT_ORDER if counts.get(k)) or "-"
        status = h.get("status") if h.get("status") in ("pass", "fail") else "error"
        nights.append({**h, "status": status, "counts_text": text,
                       "link": h.get("report") or f"{h.get('date')}/status.json"})

    def rate(n: int) -> dict:
        last = nights[:n]
        return {"n": len(last), "passed": sum(1 for x in last if x["status"] == "pass")}

    streak = {"n": 0, "status": nights[0]["status"] if nights else ""}
    for x in nights:
        if x["status"] != streak["status"]:
            break
        streak["n"] += 1
    return _env().get_template("nightly.html.j2").render(
        nights=nights, latest=nights[0] if nights else None, trend=list(reversed(nights[:trend_nights])),
        rate7=rate(7), rate30=rate(30), streak=streak)
