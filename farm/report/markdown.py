"""A Markdown summary of a comparison, fit for a pull-request comment (GitHub, GitLab).

In this order: the verdict and the counts, a link to the full report, the problems, one line per
failing filmstrip (farm.report.strips: the traces of one model, sequence, camera and size across
timestamps; where in time it fails, linked to the strip in the full report when there is a link), the worst
differences (lowest SSIM first, up to `limit`) as a table with thumbnails of the new frame, the
golden and the difference heatmap, the new traces (up to `limit`, with a thumbnail), the commands
that approve them, and then everything else (the rest of the failures and new traces, the passed
traces) as plain lines inside a collapsed ``<details>``.

Links. `image_base` is the absolute http(s) URL where the report folder is published
(``https://ci.example/job/7/report/``) or its img/ folder itself: the images are in the report's
img/ folder, so a base whose last part is not ``img`` gets ``img/`` appended. Without one (the
default) the summary has no image links at all, since relative ``img/...`` links break once the
summary is posted as a comment: the tables drop their image columns and one line (`IMAGES_HINT`)
says how to get them. (The command line refuses a relative base: farm.settings.check_image_base.)
The full report's link is `report_url`, else derived from `image_base` (its report folder +
``index.html``); with neither there is no link.

Size. The whole summary is at most `MAX_CHARS` (65,536: GitHub's limit for a comment body);
lines of the <details> part are dropped first, then the filmstrip lines, then the tables are cut,
with a note saying how many traces (and filmstrips) are not shown and where the full report is.

Escaping. Every string from a model file is HTML-escaped, and the characters of Markdown's link
and image syntax (``[ ] ( ) !``), emphasis (``* _ ~``), code (`` ` ``) and tables (``|``) are
written as character references, so ``[x](javascript:...)`` in a sequence name stays text.
"""

from __future__ import annotations

import html

from farm.compare.status import FAILING, FRESH, statuses, verdict_word
from farm.escape import markdown
from farm.report.model import approve_command, report_order
from farm.report.strips import filmstrips
from farm.settings import SettingError, check_image_base

__all__ = ["IMAGES_HINT", "MAX_CHARS", "approve_source", "image_url", "markdown_summary", "md_text", "published",
           "report_link"]

THUMB = 96
MAX_CHARS = 65536
IMAGES_HINT = ("no images in this summary: pass `--image-base URL`, the http(s) URL where the report folder is"
               " published, to show thumbnails and link the full report")


md_text = markdown  # a string from a model file as inert Markdown/HTML text, one line (farm.escape)


_cell = md_text


def published(image_base: str | None) -> bool:
    """Whether `image_base` is an absolute http(s) URL (farm.settings' rule): only then does the
    summary link images."""
    try:
        return check_image_base(image_base) is not None
    except SettingError:
        return False


def _img_dir(base: str) -> str:
    """The URL prefix of the report's img/ folder for an absolute `image_base` (see the module docstring)."""
    trimmed = base.rstrip("/")
    if trimmed.rsplit("/", 1)[-1] == "img":
        return trimmed + "/"
    return trimmed + "/img/"


def image_url(base: str | None, src: str | None) -> str | None:
    """The link of a report image (`src` as the report names it: img/ab/NAME, farm.report.images) under
    `image_base`; None without an absolute base (a relative link would break once posted)."""
    if not src or not published(base):
        return None
    return _img_dir(base) + (src.removeprefix("img/") if src.startswith("img/") else src.rsplit("/", 1)[-1])


def report_link(image_base: str | None, report_url: str | None = None) -> str | None:
    if report_url:
        return report_url
    if published(image_base):
        folder = _img_dir(image_base)[: -len("img/")]
        return folder + "index.html"
    return None


def approve_source(results: dict, link: str | None) -> tuple[str | None, list[str]]:
    """What the summary's approve commands name, and the lines that say where to run them: the
    published report's URL when there is an http(s) link (farm.report.published reads its folder
    from it), else the report folder's name as the reviewer downloads it (the CI artifact), never
    the runner's store; without a recorded origin (a summary made outside write_report), the run in
    its store."""
    origin = results.get("origin") or {}
    if link and link.startswith(("http://", "https://")):
        return link.split("#", 1)[0], ["Approve after review, in your checkout of this branch (the images come"
                                       " from the published report, checked against its results.json):"]
    folder = origin.get("folder")
    if not folder:
        return None, ["Approve after review (exactly the images this run stored):"]
    ci = origin.get("ci") or {}
    if ci.get("provider") == "github" and ci.get("run_id"):
        fetch = (f"<code>gh run download {md_text(ci['run_id'])} --name {md_text(folder)} --dir"
                 f" {md_text(folder)}</code>")
    else:
        fetch = f"the report artifact, unpacked as <code>{md_text(folder)}/</code>"
    return folder, [f"Approve after review, in your checkout of this branch, with {fetch} (the images come from"
                    f" the report, checked against its results.json):"]


def _img(base: str | None, src: str | None, alt: str) -> str:
    url = image_url(base, src)
    if not url:
        return ""
    return f'<img src="{html.escape(url, quote=True)}" width="{THUMB}" alt="{alt}">'


def _metrics(t: dict) -> tuple[str, str, str]:
    m = t.get("metrics") or {}
    ssim = "-" if m.get("ssim") is None else f"{m['ssim']:.4f}"
    over = "-" if not m else f"{100 * m.get('pixels_over', 0):.2f}%"
    return ssim, over, str(m.get("max_diff", "-")) if m else "-"


def _tables(traces: list[dict], by_key: dict, image_base: str | None, limit: int, diff: bool):
    """The worst differences and the new traces as tables: ([(heading, rows)], the keys shown).
    Image columns only with an absolute `image_base` (see the module docstring)."""
    images = published(image_base)
    new_label, golden_label = ("head", "base") if diff else ("new", "golden")
    bad = [t for t in traces if t["status"] in FAILING]
    fresh = [t for t in traces if t["status"] in FRESH]
    shown: set[str] = set()
    table_rows: list[tuple[str, list[str]]] = []  # (section heading, rows) in order
    if bad:
        rows = []
        for t in bad[:limit]:
            v = by_key.get(t["key"], {})
            ssim, over, mx = _metrics(t)
            pictures = "".join(f" {_img(image_base, v.get(src), alt)} |" for src, alt in (
                ("new_src", new_label), ("golden_src", golden_label), ("diff_src", "difference"))) if images else ""
            rows.append(f"| <code>{_cell(t['key'])}</code> | {t['status']} | {ssim} | {over} | {mx} |{pictures}")
            shown.add(t["key"])
        columns = f" {new_label} | {golden_label} | difference |" if images else ""
        table_rows.append((f"### Worst differences ({len(rows)} of {len(bad)})\n\n"
                           f"| trace | status | SSIM | pixels over | max diff |{columns}\n"
                           f"| --- | --- | ---: | ---: | ---: |{' --- |' * 3 if images else ''}", rows))
    if fresh:
        what = "Added and removed traces" if diff else "New traces (no golden yet)"
        rows = []
        for t in fresh[:limit]:
            v = by_key.get(t["key"], {})
            src, alt = (v.get("new_src"), new_label) if v.get("new_src") else (v.get("golden_src"), golden_label)
            picture = f" {_img(image_base, src, alt)} |" if images else ""
            rows.append(f"| <code>{_cell(t['key'])}</code> | {t['status']} |{picture}")
            shown.add(t["key"])
        table_rows.append((f"### {what} ({len(rows)} of {len(fresh)})\n\n| trace | status |"
                           f"{' frame |' if images else ''}\n| --- | --- |{' --- |' if images else ''}", rows))
    return table_rows, shown


def _strip_lines(results: dict, link: str | None, strips: list | None = None) -> list[str]:
    """One line per failing filmstrip (of `strips`, default the results' own): its status, name (linked
    to its anchor in the full report when there is a link), its frames' counts and where in time it fails."""
    lines = []
    for strip in filmstrips(results["traces"]) if strips is None else strips:
        if not strip.failing:
            continue
        name = f"<code>{_cell(strip.name)}</code>"
        if link:
            target = html.escape(f"{link.split('#', 1)[0]}#{strip.anchor}", quote=True).replace(")", "%29")
            name = f"[{name}]({target})"
        where = "" if link else f" (the full report's <code>#{strip.anchor}</code>)"
        lines.append(f"- {strip.status}: filmstrip {name}{where}: {_cell(strip.summary())}")
    return lines


def _strips_heading(lines: list[str], total: int, diff: bool) -> str:
    what = "Filmstrips with changes" if diff else "Failing filmstrips"
    shown = f"{len(lines)} of {total}" if len(lines) != total else str(total)
    return f"### {what} ({shown}): where in time they {'change' if diff else 'fail'}"


def _fit(assemble, tables: list, details: list[str], strips: list[str], max_chars: int) -> str:
    """The summary cut to `max_chars`: <details> lines dropped from the end first, then filmstrip lines,
    then table rows, until it fits (`assemble` adds the note saying what was cut)."""
    details, strips, tables = list(details), list(strips), [(h, list(r)) for h, r in tables]
    dropped = dropped_strips = 0
    text = assemble(tables, details, strips, 0, 0)
    while len(text) > max_chars:
        if details:
            avg = max(1, sum(len(d) + 1 for d in details) // len(details))
            cut = min(len(details), max(1, -(-(len(text) - max_chars) // avg)))
            del details[-cut:]
            dropped += cut
        elif strips:
            strips.pop()
            dropped_strips += 1
        elif any(r for _, r in tables):
            h, r = next((h, r) for h, r in reversed(tables) if r)
            r.pop()
            dropped += 1
        else:
            return text[: max_chars - 1] + "…"
        text = assemble(tables, details, strips, dropped, dropped_strips)
    return text


def markdown_summary(results: dict, views: list[dict] | None = None, *, image_base: str | None = None,
                     limit: int = 10, report_url: str | None = None, max_chars: int = MAX_CHARS,
                     strips: list | None = None, in_order=None) -> str:
    """`in_order`: the traces in report order when the caller has them (farm.report.model.report_order)."""
    diff = results.get("kind") == "diff"
    counts = results.get("counts", {})
    if diff:
        base, head = _cell(results["base"]["job"]), _cell(results["head"]["job"])
        title = f"modelfarm diff <code>{base}</code> → <code>{head}</code>"
    else:
        title = f"modelfarm <code>{_cell(results['job'])}</code>"
    icon = verdict_word(results, "markdown")
    order = statuses(results.get("kind"))
    link = report_link(image_base, report_url)
    head_lines = [f"## {title}: {icon}", ""]
    head_lines += ["| status | traces |", "| --- | ---: |"]
    for s in order:
        head_lines.append(f"| {s} | {counts.get(s, 0)} |")
    head_lines.append(f"| **total** | **{counts.get('total', 0)}** ({results.get('compared', 0)} compared) |")
    head_lines.append("")
    if link:
        head_lines += [f"**[Full report]({html.escape(link, quote=True).replace(')', '%29')})**", ""]
    if not published(image_base):
        head_lines += [f"_{IMAGES_HINT}._", ""]
    for p in results.get("problems", []):
        head_lines.append(f"- {_cell(p)}")
    for n in results.get("notes", []):
        head_lines.append(f"- note: {_cell(n)}")
    if results.get("problems") or results.get("notes"):
        head_lines.append("")

    traces = report_order(results["traces"]) if in_order is None else in_order
    table_rows, shown = _tables(traces, {v["key"]: v for v in views or []}, image_base, limit, diff)
    strip_lines = _strip_lines(results, link, strips)
    tail_lines = []
    if not diff and (counts.get("new") or counts.get("fail")):
        source, where = approve_source(results, link)
        tail_lines += [*where, ""]
        if counts.get("new"):
            tail_lines.append(f"    {approve_command(results, extra=('--new',), source=source)}")
        if counts.get("fail"):
            tail_lines.append(f"    {approve_command(results, extra=('--failed',), source=source)}")
        tail_lines.append("")
    rest_lines = []
    for t in traces:
        if t["key"] in shown:
            continue
        ssim, over, _ = _metrics(t)
        extra = f" (SSIM {ssim}, {over} off)" if ssim != "-" else ""
        rest_lines.append(f"- {t['status']}: <code>{_cell(t['key'])}</code>{extra}")

    def assemble(tables: list[tuple[str, list[str]]], details: list[str], strips: list[str], dropped: int,
                 dropped_strips: int) -> str:
        lines = list(head_lines)
        if strips:
            lines += [_strips_heading(strips, len(strip_lines), diff), "", *strips, ""]
        for heading, rows in tables:
            lines += [heading, *rows, ""]
        lines += tail_lines
        if details:
            lines += [f"<details><summary>The other {len(details)} trace(s)</summary>", "", *details, "",
                      "</details>", ""]
        if dropped or dropped_strips:
            where = f" [the full report]({link})" if link else " the full report (index.html)"
            cut = " and ".join(([f"{dropped} trace(s)"] if dropped else [])
                               + ([f"{dropped_strips} filmstrip(s)"] if dropped_strips else []))
            lines += [f"_{cut} not shown: this summary is cut at {max_chars:,} characters for a"
                      f" pull-request comment; see{where}._", ""]
        return "\n".join(lines)

    return _fit(assemble, table_rows, rest_lines, strip_lines, max_chars)
