"""Reports of a comparison (farm.compare.runs results): static HTML, JUnit XML, Markdown.

`write_report(results, out_dir)` writes a self-contained folder (nothing is fetched from the
network; open index.html from disk or serve the folder):

    index.html     the report's landing page (farm.report.html: Jinja2 with autoescape, so every
                   string that comes from a model file is escaped): verdict, counts, the first page
                   of cards, failures first; the traces of one model, sequence, camera and size
                   across timestamps also as filmstrips (farm.report.strips)
    pages/         the other pages (N.html) and the compact rows of every trace (rows-N.js) that
                   search and filters read on any page (farm.report.pages); absent when one page holds all
    static/        report.css, report.js (views, filters; Approve/Reject under `farm serve`), pages.js
    img/ab/        the new frames, the goldens, the difference heatmaps and SSIM maps, in shards by
                   name (farm.report.images.image_relpath)
    junit.xml      one test case per trace (farm.report.junit), written in pieces
    summary.md     counts, the failing filmstrips, the worst differences with thumbnails (farm.report.markdown)
    results.json   the results the report was made from (one trace a line), with ``origin`` (farm.report.published:
                   the folder's name, its URL, the CI run, the goldens relative to the work tree), so
                   `farm approve REPORT` works from this folder alone
"""

from __future__ import annotations

from farm.report.html import render_html, write_report
from farm.report.junit import junit_xml
from farm.report.markdown import markdown_summary

__all__ = ["junit_xml", "markdown_summary", "render_html", "write_report"]
