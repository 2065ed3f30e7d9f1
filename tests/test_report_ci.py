"""Issue 16: what CI reads from a report: JUnit (names, times, failures, attachments, the schema
Jenkins and GitLab use) and summary.md as a pull-request comment (links, size, escaping)."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from golden_runs import broken, image, key, make_run

from farm import goldens as G
from farm.compare.runs import compare_run
from farm.report import write_report
from farm.report.images import image_relpath
from farm.report.junit import attachment_path, case_names

XSD = Path(__file__).parent / "data" / "junit-jenkins.xsd"
PASS, FAIL = key("models/crate.mdx", "Stand", 0), key("models/crate.mdx", "Walk", 250)
NEW = key("units/v1.2/footman.mdx", "Attack", 0)
BY = "ci-bot"


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("ci")
    base = make_run(tmp / "store", {PASS: image(1), FAIL: image(2)})
    G.approve(tmp / "goldens", base, list(base.traces), by=BY)
    run = make_run(tmp / "store", {PASS: image(1), FAIL: broken(image(2)), NEW: image(3)})
    results = compare_run(run, tmp / "goldens")
    out = tmp / "report"
    write_report(results, out)
    return results, out


def validate(xml_text: str) -> str:
    """Validate against tests/data/junit-jenkins.xsd with lxml, else xmlschema; which one ran."""
    try:
        from lxml import etree  # optional: the schema validator, when installed
        schema = etree.XMLSchema(etree.parse(str(XSD)))
        schema.assertValid(etree.fromstring(xml_text.encode("utf-8")))
        return "lxml"
    except ImportError:
        pass
    xmlschema = pytest.importorskip("xmlschema", reason="neither lxml nor xmlschema is installed")
    xmlschema.XMLSchema(str(XSD)).validate(xml_text)
    return "xmlschema"


def test_junit_validates_against_the_jenkins_schema(report):
    results, out = report
    validate((out / "junit.xml").read_text())
    # the schema has teeth: Jenkins' model has no `skipped` on <testsuites>
    bad = (out / "junit.xml").read_text().replace('<testsuites name="modelfarm"', '<testsuites skipped="0" name="x"')
    with pytest.raises(Exception):  # noqa: B017, PT011 - lxml's or xmlschema's validation error
        validate(bad)


def test_junit_names_times_and_new_traces(report):
    results, out = report
    root = ET.fromstring((out / "junit.xml").read_text())
    cases = {(c.get("classname"), c.get("name")): c for c in root.iter("testcase")}
    assert set(cases) == {("models.crate_mdx", "Stand|0ms|auto|32x32|msaa0|team0|transparent"),
                          ("models.crate_mdx", "Walk|250ms|auto|32x32|msaa0|team0|transparent"),
                          ("units.v1_2.footman_mdx", "Attack|0ms|auto|32x32|msaa0|team0|transparent")}
    assert case_names("not a key") == ("modelfarm", "not a key")
    times = [float(c.get("time")) for c in cases.values()]
    assert all(t > 0 for t in times)
    assert float(root.find("testsuite").get("time")) == pytest.approx(sum(times), abs=1e-5)
    new = cases[case_names(NEW)]
    assert new.find("failure").get("type") == "new"  # new traces fail the run: a failure, not a skip
    assert root.get("failures") == "2"


def test_junit_attachments_on_their_own_lines(report, monkeypatch):
    results, out = report
    root = ET.fromstring((out / "junit.xml").read_text())
    cases = {(c.get("classname"), c.get("name")): c for c in root.iter("testcase")}
    lines = cases[case_names(FAIL)].find("system-out").text.splitlines()
    json.loads(lines[0])
    att = [ln for ln in lines if ln.startswith("[[ATTACHMENT|")]
    assert len(att) == 3 and all(ln.endswith("]]") for ln in att)  # new, golden, difference
    paths = [Path(ln[len("[[ATTACHMENT|"):-2]) for ln in att]
    assert all(p.is_absolute() and p.is_file() and p.parent == out / "img" / p.name[:2] for p in paths)
    assert not [ln for ln in cases[case_names(PASS)].find("system-out").text.splitlines() if "ATTACHMENT" in ln]
    rel = f"report/img/{paths[0].name[:2]}/{paths[0].name}"
    assert attachment_path(paths[0], {"CI_PROJECT_DIR": str(out.parent)}) == rel


# --- summary.md as a pull-request comment

from farm.report.markdown import MAX_CHARS, markdown_summary  # noqa: E402


def test_summary_links_counts_first_and_details(report, tmp_path):
    results, out = report
    md = (out / "summary.md").read_text()
    lines = md.splitlines()
    assert lines[2:4] == ["| status | traces |", "| --- | ---: |"]  # counts right after the title
    fail = results["traces"][FAIL]
    assert "<img" not in md and "--image-base URL" in md  # no image base: no image links, and how to get them
    assert "<details><summary>The other 1 trace(s)</summary>" in md and f"pass: <code>{PASS.split('|')[0]}" in md
    assert "Full report" not in md  # relative base, no --report-url: nothing to link to
    write_report(results, tmp_path / "r", image_base="https://ci.example/job/7/report")
    md = (tmp_path / "r" / "summary.md").read_text()
    assert f'<img src="https://ci.example/job/7/report/{image_relpath(fail["png"])}"' in md
    assert "**[Full report](https://ci.example/job/7/report/index.html)**" in md
    assert md.index("| status | traces |") < md.index("Full report") < md.index("### Worst differences")
    write_report(results, tmp_path / "r2", image_base="https://cdn.example/x/img/", report_url="https://ci/r.html")
    md = (tmp_path / "r2" / "summary.md").read_text()
    assert 'src="https://cdn.example/x/img/' in md and "[Full report](https://ci/r.html)" in md


def test_summary_is_bounded_and_says_what_it_cut(tmp_path):
    traces = {}
    for i in range(3000):
        k = key(f"models/m{i:04d}_with_a_rather_long_path_name/unit.mdx", "Stand", i)
        traces[k] = {"key": k, "status": "pass" if i % 3 else "fail", "match": "exact", "model": k.split("|")[0],
                     "metrics": {"ssim": 0.5, "pixels_over": 0.1, "max_diff": 9}}
    results = {"kind": "goldens", "job": "big", "store": str(tmp_path), "goldens": str(tmp_path),
               "traces": traces, "counts": {"fail": 1000, "pass": 2000, "total": 3000}, "compared": 3000,
               "verdict": "fail", "problems": []}
    md = markdown_summary(results, image_base="https://ci/r/")
    assert len(md) <= MAX_CHARS
    assert "trace(s) not shown: this summary is cut at 65,536 characters" in md
    assert "[the full report](https://ci/r/index.html)" in md
    assert md.rstrip().endswith("._") and "</details>" in md  # the collapsed part is closed


def test_summary_escapes_markdown_links_from_model_strings(tmp_path):
    evil = key("models/x.mdx", "[x](javascript:alert(1))", 0)
    img = key("models/y.mdx", "![p](https://evil/p.png)", 0)
    results = {"kind": "goldens", "job": "[j](javascript:1)", "store": str(tmp_path), "goldens": str(tmp_path),
               "traces": {k: {"key": k, "status": "fail", "reason": "[r](javascript:2)", "metrics": None}
                          for k in (evil, img)},
               "counts": {"fail": 2, "total": 2}, "compared": 2, "verdict": "fail",
               "problems": ["see [here](javascript:3)"]}
    md = markdown_summary(results)
    prose = "\n".join(ln for ln in md.splitlines() if not ln.startswith("    "))  # code blocks stay literal
    assert "](" not in prose  # no link syntax survives outside the (copyable) command code blocks
    assert "[x]" not in prose and "![p]" not in prose
    assert "&#91;x&#93;&#40;javascript:alert&#40;1&#41;&#41;" in md
