"""JUnit XML: one test case per trace, for CI systems (GitLab, Jenkins, GitHub test reporters).

    <testsuites name="modelfarm" tests=".." failures=".." errors=".." skipped="..">
      <testsuite name="JOB" ...>
        <properties>run, store, goldens (or base/head), verdict</properties>
        <testcase classname="models/crate.mdx" name="Stand|0ms|auto|128x128|..." time="0">

A ``fail`` or ``rejected`` trace is a <failure> (type = the status) whose message is the reason,
an ``error`` trace (did not render) an <error>, a ``new`` trace a <failure type="new"> unless the
comparison allowed new traces (then <skipped>). In a diff, ``changed`` traces fail, ``added`` and
``removed`` ones are skipped with a message, ``unchanged`` ones pass. Each case's <system-out>
holds the metrics and thresholds. Characters XML cannot carry (control characters from a model
file) are replaced by U+FFFD.
"""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET

from farm.compare.status import FAILING, FRESH
from farm.plan.keys import parse_key

__all__ = ["junit_xml"]

_BAD_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ufffe\uffff]")


def _x(text) -> str:
    return _BAD_XML.sub("\ufffd", "" if text is None else str(text))


def _kind(t: dict, allow_new: bool) -> str | None:
    s = t["status"]
    if s == "error":
        return "error"
    if s in FAILING:
        return "failure"
    if s == "new":
        return "skipped" if allow_new else "failure"
    if s in FRESH:
        return "skipped"
    return None


def _case_names(key: str) -> tuple[str, str]:
    """(classname, name) of a trace's test case: the model, and the rest of the key."""
    try:
        k = parse_key(key)
    except ValueError:
        return key, key
    return k.model, k.rest


def junit_xml(results: dict) -> str:
    traces = list(results["traces"].values())
    allow_new = bool(results.get("allow_new"))
    kinds = [_kind(t, allow_new) for t in traces]
    n = {k: kinds.count(k) for k in ("failure", "error", "skipped")}
    root = ET.Element("testsuites", name="modelfarm", tests=str(len(traces)), failures=str(n["failure"]),
                      errors=str(n["error"]), skipped=str(n["skipped"]), time="0")
    suite = ET.SubElement(root, "testsuite", name=_x(results.get("job")), tests=str(len(traces)),
                          failures=str(n["failure"]), errors=str(n["error"]), skipped=str(n["skipped"]), time="0",
                          timestamp=_x(results.get("created")))
    props = ET.SubElement(suite, "properties")
    items = [("kind", results.get("kind")), ("run", results.get("job")), ("store", results.get("store")),
             ("verdict", results.get("verdict"))]
    if results.get("kind") == "diff":
        items += [("base", results["base"]["job"]), ("head", results["head"]["job"])]
    else:
        items += [("goldens", results.get("goldens")), ("allow_new", str(allow_new).lower())]
    for name, value in items:
        ET.SubElement(props, "property", name=name, value=_x(value))
    for t, kind in zip(traces, kinds, strict=True):
        model, rest = _case_names(t["key"])
        case = ET.SubElement(suite, "testcase", classname=_x(model), name=_x(rest), time="0")
        message = t.get("reason") or t["status"]
        if kind == "failure":
            el = ET.SubElement(case, "failure", type=t["status"], message=_x(message))
            el.text = _x(message)
        elif kind == "error":
            el = ET.SubElement(case, "error", type="error", message=_x(message))
            el.text = _x(message)
        elif kind == "skipped":
            ET.SubElement(case, "skipped", message=_x(f"{t['status']}: {message}"))
        out = {"status": t["status"], "match": t.get("match"), "metrics": t.get("metrics"),
               "thresholds": t.get("thresholds"), "golden": (t.get("golden") or {}).get("digest"),
               "env": t.get("env")}
        ET.SubElement(case, "system-out").text = _x(json.dumps(out, sort_keys=True, ensure_ascii=False))
    ET.indent(root, space=" ")
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"
