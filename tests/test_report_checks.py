"""Issue 25, points 1 and 2. One pipeline (farm.flows.pipeline.compare_job) after `farm run`, the nightly
run and `farm demo`; and the reports only show what the comparison decided: each check (a metric,
the limit held against it, passed) is in the results (farm.compare.metrics), the verdict's words are
farm.compare.status's, and nothing in farm/report holds a metric against a threshold. Results
written before checks were recorded (an old comparison.json) render to the same bytes."""

from __future__ import annotations

import ast
import copy
import re
from dataclasses import fields
from pathlib import Path

from golden_runs import broken, image, key, make_run, noisy

from farm import goldens as G
from farm.compare.metrics import Comparison, compare, metric_checks
from farm.compare.runs import compare_run
from farm.compare.status import VERDICT_WORDS
from farm.flows.pipeline import CompareOptions, compare_job
from farm.plan.thresholds import Thresholds
from farm.report import write_report
from farm.report.model import metric_rows
from farm.report.text import summary_text

ROOT = Path(__file__).resolve().parents[1]
REPORT = ROOT / "farm" / "report"
SOURCES = sorted(p for p in REPORT.rglob("*") if p.suffix in (".py", ".j2", ".js") and "__pycache__" not in p.parts)
# The metrics of a comparison: Comparison's numeric fields (a new metric is covered as it is added).
METRICS = [f.name for f in fields(Comparison) if f.type in ("float", "float | None", "int")]
A, B, C = key("models/a.mdx"), key("models/b.mdx"), key("models/c.mdx")


def _old(results: dict) -> dict:
    """`results` as written before checks were recorded (comparison.json of 0.2)."""
    old = copy.deepcopy(results)
    for t in old["traces"].values():
        if t.get("metrics"):
            del t["metrics"]["checks"]
    return old


def _compared(tmp_path: Path) -> dict:
    """A run compared with goldens: one trace identical, one within the thresholds, one broken, one new."""
    base = make_run(tmp_path / "out", {A: image(1), B: image(2), C: image(3)}, job_id="base")
    G.approve(tmp_path / "goldens", base, [A, B, C], by="ci")
    head = make_run(tmp_path / "out", {A: image(1), B: noisy(image(2)), C: broken(image(3)),
                                       key("models/d.mdx"): image(4)}, job_id="head")
    return compare_run(head, tmp_path / "goldens")


def test_report_code_holds_no_threshold():
    names = (*Thresholds.keys(), "Thresholds")
    hits = [f"{p.relative_to(ROOT)}:{n}: {line.strip()}" for p in SOURCES
            for n, line in enumerate(p.read_text("utf-8").splitlines(), 1) if any(x in line for x in names)]
    assert METRICS and not hits


def test_report_code_compares_no_metric():
    """No <, <=, >, >= with a metric on either side (Python, and the templates' expressions)."""
    word = re.compile(r"\b(" + "|".join(METRICS) + r")\b")
    hits = []
    for p in SOURCES:
        src = p.read_text("utf-8")
        if p.suffix == ".py":
            for node in ast.walk(ast.parse(src)):
                if isinstance(node, ast.Compare) and any(isinstance(op, (ast.Lt, ast.LtE, ast.Gt, ast.GtE))
                                                         for op in node.ops):
                    seg = ast.get_source_segment(src, node)
                    if word.search(seg):
                        hits.append(f"{p.relative_to(ROOT)}:{node.lineno}: {seg}")
        else:
            for expr in re.findall(r"\{[{%](.*?)[%}]\}", src, re.S):
                if word.search(expr) and re.search(r"[<>]", expr):
                    hits.append(f"{p.relative_to(ROOT)}: {expr.strip()}")
    assert not hits


def test_the_verdict_is_spelled_in_one_place():
    words = {w for ws in VERDICT_WORDS.values() for w in ws}
    hits = [f"{p.relative_to(ROOT)}:{n}: {w}" for p in [*SOURCES, ROOT / "farm" / "flows" / "demo.py"]
            for n, line in enumerate(p.read_text("utf-8").splitlines(), 1) for w in words if w in line]
    assert not hits


def test_rows_show_the_comparisons_checks():
    """The metric rows are the comparison's decision: a limit and outcome recorded by a stricter
    comparison are shown as recorded, not judged again against the trace's thresholds."""
    cmp = compare(noisy(image(2), 3), image(2))
    t = {"metrics": cmp.to_dict(), "thresholds": Thresholds().to_dict()}
    assert cmp.passed and all(c["passed"] for c in t["metrics"]["checks"].values())
    t["metrics"]["checks"]["ssim"].update(limit=">= 0.99999", passed=False)
    row = metric_rows(t)[0]
    assert (row["limit"], row["ok"]) == (">= 0.99999", False)


def test_old_results_get_the_same_checks():
    """Metrics without checks (0.2): derived once (metric_checks) from the values and thresholds, the
    same as the comparison records; for a frame too small for SSIM as for a broken one."""
    th = Thresholds(min_ssim=0.995, pixel_delta=8, max_pixels_over=0.01)
    small = image(5, size=8)
    for new, old in ((broken(image(3)), image(3)), (noisy(image(2), 4), image(2)), (noisy(small, 40), small)):
        cmp = compare(new, old, th)
        recorded = cmp.to_dict()
        legacy = {k: v for k, v in recorded.items() if k != "checks"}
        assert metric_checks(legacy, th.to_dict()) == recorded["checks"] == cmp.checks
        assert cmp.passed == all(c["passed"] is not False for c in cmp.checks.values())
        trace = {"metrics": recorded, "thresholds": th.to_dict()}
        assert metric_rows({**trace, "metrics": legacy}) == metric_rows(trace)
    assert cmp.checks["ssim"]["passed"] is None and cmp.checks["pixels_over"]["passed"] is False


def test_an_old_comparison_renders_to_the_same_bytes(tmp_path):
    results = _compared(tmp_path)
    assert {t["status"] for t in results["traces"].values()} == {"pass", "fail", "new"}
    new = write_report(results, tmp_path / "new", image_base="https://ci.example/r/")
    old = write_report(_old(results), tmp_path / "old", image_base="https://ci.example/r/")
    for part in ("html", "markdown"):
        assert new[part].read_bytes() == old[part].read_bytes()
    assert summary_text(results) == summary_text(_old(results))
    page = new["html"].read_text("utf-8")
    failed = [c for t in results["traces"].values() for c in metric_checks(t["metrics"], None).values()
              if c["passed"] is False]
    assert failed and page.count('class="over-limit"') == len(failed)  # each failed check marked, once
    assert "thresholds: SSIM &gt;= 0.99, at most 0.1% of pixels off by more than 16" in page  # the new trace


def test_one_pipeline_after_run_nightly_and_demo():
    """`farm run`, the nightly run and `farm demo` compare and report through farm.flows.pipeline.compare_job
    only (no compare_run or write_report of their own)."""
    for rel in ("farm/cli/jobs.py", "farm/flows/nightly.py", "farm/flows/demo.py"):
        tree = ast.parse((ROOT / rel).read_text("utf-8"))
        called = {n.func.id for n in ast.walk(tree) if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)}
        assert "compare_job" in called, rel
        assert not called & {"compare_run", "write_report", "write_reports", "update_goldens"}, rel


def test_compare_job_updates_compares_again_and_reports(tmp_path, monkeypatch):
    monkeypatch.delenv("FARM_GOLDENS", raising=False)
    monkeypatch.chdir(tmp_path)  # no farm.toml above
    job = make_run(tmp_path / "out", {A: image(1), B: image(2)}, job_id="first")
    nothing = compare_job(job)  # no goldens: nothing compared, what each frame shows for the bootstrap
    assert nothing.status is None and nothing.results is None and nothing.first["counts"]["new"] == 2
    heard = []
    done = compare_job(job, CompareOptions(update="new", report=tmp_path / "rep"),
                       on_update=lambda up, r: heard.append(up))
    assert done.folder == tmp_path / "out" / "goldens" and heard == [done.update]
    assert done.before["counts"]["new"] == 2 and done.update.keys == [A, B] and len(done.update.record["changes"]) == 2
    assert (done.status, done.results["verdict"], done.results["counts"]["pass"]) == (0, "pass", 2)
    assert done.html.is_file() and "PASSED" in done.html.read_text("utf-8")
    again = compare_job(make_run(tmp_path / "out", {A: image(1), B: broken(image(2))}, job_id="second"))
    assert (again.status, again.results["counts"]["fail"], again.reports) == (1, 1, None)
