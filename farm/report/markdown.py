"""A Markdown summary of a comparison, short enough for a pull-request comment.

The verdict and the counts, the problems, then the worst differences (lowest SSIM first, up to
`limit`) as a table with thumbnails of the new frame, the golden and the difference heatmap, then
the new traces, then the commands that approve them. Image links are `image_base` + the file name
in the report's img/ folder: relative ("img/") works where the report folder is published as it
is; pass the URL the folder is published at for a comment on GitHub or GitLab.

Every string from a model file is HTML-escaped and the table separator ``|`` is written as
``&#124;``, so a sequence name cannot break the table or inject markup.
"""

from __future__ import annotations

import html

from farm.compare.status import FAILING, FRESH, statuses
from farm.report.model import approve_command, sort_traces

__all__ = ["markdown_summary"]

THUMB = 96


def _cell(text) -> str:
    s = html.escape("" if text is None else str(text), quote=True)
    return s.replace("|", "&#124;").replace("\n", " ").replace("\r", " ").replace("`", "&#96;")


def _img(base: str, src: str | None, alt: str) -> str:
    if not src:
        return ""
    name = src.rsplit("/", 1)[-1]
    return f'<img src="{_cell(base + name)}" width="{THUMB}" alt="{alt}">'


def markdown_summary(results: dict, views: list[dict] | None = None, *, image_base: str = "img/",
                     limit: int = 10) -> str:
    diff = results.get("kind") == "diff"
    counts = results.get("counts", {})
    by_key = {v["key"]: v for v in views or []}
    if diff:
        base, head = _cell(results["base"]["job"]), _cell(results["head"]["job"])
        title = f"modelfarm diff <code>{base}</code> → <code>{head}</code>"
        icon = "✅ no changes" if results.get("verdict") == "same" else "⚠️ changes found"
    else:
        title = f"modelfarm <code>{_cell(results['job'])}</code>"
        icon = "✅ passed" if results.get("verdict") == "pass" else "❌ failed"
    order = statuses(results.get("kind"))
    lines = [f"## {title}: {icon}", ""]
    lines += ["| status | traces |", "| --- | ---: |"]
    for s in order:
        lines.append(f"| {s} | {counts.get(s, 0)} |")
    lines.append(f"| **total** | **{counts.get('total', 0)}** ({results.get('compared', 0)} compared) |")
    lines.append("")
    for p in results.get("problems", []):
        lines.append(f"- {_cell(p)}")
    if results.get("problems"):
        lines.append("")
    traces = sort_traces(results["traces"].values())
    bad = [t for t in traces if t["status"] in FAILING]
    if bad:
        lines += [f"### Worst differences ({min(len(bad), limit)} of {len(bad)})", "",
                  f"| trace | status | SSIM | pixels over | max diff | {'head' if diff else 'new'} | "
                  f"{'base' if diff else 'golden'} | difference |",
                  "| --- | --- | ---: | ---: | ---: | --- | --- | --- |"]
        for t in bad[:limit]:
            m = t.get("metrics") or {}
            v = by_key.get(t["key"], {})
            ssim = "-" if m.get("ssim") is None else f"{m['ssim']:.4f}"
            over = "-" if not m else f"{100 * m.get('pixels_over', 0):.2f}%"
            lines.append(f"| <code>{_cell(t['key'])}</code> | {t['status']} | {ssim} | {over} | "
                         f"{m.get('max_diff', '-') if m else '-'} | {_img(image_base, v.get('new_src'), 'new')} | "
                         f"{_img(image_base, v.get('golden_src'), 'golden')} | "
                         f"{_img(image_base, v.get('diff_src'), 'difference')} |")
        lines.append("")
    fresh = [t for t in traces if t["status"] in FRESH]
    if fresh:
        what = "Added and removed traces" if diff else "New traces (no golden yet)"
        lines += [f"### {what} ({min(len(fresh), limit)} of {len(fresh)})", "", "| trace | status | frame |",
                  "| --- | --- | --- |"]
        for t in fresh[:limit]:
            v = by_key.get(t["key"], {})
            lines.append(f"| <code>{_cell(t['key'])}</code> | {t['status']} | "
                         f"{_img(image_base, v.get('new_src') or v.get('golden_src'), 'frame')} |")
        lines.append("")
    if not diff and (counts.get("new") or counts.get("fail")):
        lines.append("Approve after review (exactly the images this run stored):")
        lines.append("")
        if counts.get("new"):
            lines.append(f"    {approve_command(results, extra=('--new',))}")
        if counts.get("fail"):
            lines.append(f"    {approve_command(results, extra=('--failed',))}")
        lines.append("")
    return "\n".join(lines)
