"""Reports of a comparison (farm.compare.runs results): static HTML, JUnit XML, Markdown.

`write_report(results, out_dir)` writes a self-contained folder (nothing is fetched from the
network; open index.html from disk or serve the folder):

    index.html     the report (farm.report.html: Jinja2 with autoescape, so every string that
                   comes from a model file is escaped); the traces of one model, sequence, camera
                   and size across timestamps also as filmstrips (farm.report.strips)
    static/        report.css and report.js (views, filters; Approve/Reject under `farm serve`)
    img/           the new frames, the goldens, the difference heatmaps and SSIM maps, copied
    junit.xml      one test case per trace (farm.report.junit)
    summary.md     counts, the failing filmstrips, the worst differences with thumbnails (farm.report.markdown)
    results.json   the results the report was made from, with ``origin`` (farm.report.published:
                   the folder's name, its URL, the CI run, the goldens relative to the work tree), so
                   `farm approve REPORT` works from this folder alone
"""

from __future__ import annotations

from farm.report.html import render_html, write_report
from farm.report.junit import junit_xml
from farm.report.markdown import markdown_summary

__all__ = ["junit_xml", "markdown_summary", "render_html", "write_report"]
