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
    assert all(p.is_absolute() and p.is_file() and p.parent == out / "img" for p in paths)
    assert not [ln for ln in cases[case_names(PASS)].find("system-out").text.splitlines() if "ATTACHMENT" in ln]
    assert attachment_path(paths[0], {"CI_PROJECT_DIR": str(out.parent)}) == f"report/img/{paths[0].name}"
