"""JUnit XML: one test case per trace, for CI systems (GitLab, Jenkins, GitHub test reporters).

    <testsuites name="modelfarm" tests=".." failures=".." errors=".." time="..">
      <testsuite name="JOB" tests=".." failures=".." errors=".." skipped=".." time="..">
        <properties>run, store, goldens (or base/head), verdict</properties>
        <testcase classname="models.crate_mdx" name="Stand|0ms|auto|128x128|..." time="0.0123">

Names. ``classname`` is the model path of the key (`farm.plan.keys.parse_key`) with every ``.``
replaced by ``_`` and then every ``/`` by ``.``: ``models/crate.mdx`` -> ``models.crate_mdx``.
Jenkins splits a classname at its last dot into package and class, so the folders become packages
and the model file (extension kept as ``_mdx``) the class; GitLab shows the classname as it is.
``name`` is the rest of the key (`TraceKey.rest`). A key that does not parse is the name, with the
classname ``modelfarm``.

Times (seconds): the frame's render time when the worker recorded one (``render_s`` in its sidecar)
plus the comparison's; else the comparison's (``compare_s``, measured by farm.compare.runs). Never
all zeros; the suite's time is the sum.

Outcomes. A ``fail`` or ``rejected`` trace is a <failure> (type = the status) whose message is the
reason, an ``error`` trace (did not render) an <error>, a ``new`` trace a <failure type="new"> when
new traces fail the run (the default) and <skipped> when the comparison allowed them. In a diff,
``changed`` traces fail, ``added`` and ``removed`` ones are skipped with a message, ``unchanged``
ones pass.

<system-out> holds the metrics and thresholds (one JSON line) and, for every trace that is not a
pass, its images as ``[[ATTACHMENT|path]]`` lines (the new frame, the golden, the difference
heatmap), each on a line of its own: the Jenkins junit-attachments plugin and GitLab read these.
Paths are absolute (Jenkins), or relative to $CI_PROJECT_DIR when that is set and holds them
(GitLab wants them relative to the project folder). Only the <testsuite> carries ``skipped``
(Jenkins' schema has no such attribute on <testsuites>). Characters XML cannot carry (control
characters from a model file) are replaced by U+FFFD. tests/data/junit-jenkins.xsd is the schema
the tests validate this against.
"""

from __future__ import annotations

import json
import os
import xml.etree.ElementTree as ET
from pathlib import Path

from farm.compare.status import PASSING, outcome
from farm.escape import xml as xml_text
from farm.files import write_chunks
from farm.plan.keys import model_and_rest
from farm.report.images import heatmap_relpath, image_relpath

__all__ = ["attachment_path", "case_names", "junit_chunks", "junit_xml", "write_junit"]

NO_CLASS = "modelfarm"


_x = xml_text  # every name and text of the file: what XML 1.0 can carry (farm.escape)


def case_names(key: str) -> tuple[str, str]:
    """(classname, name) of a trace's test case (see the module docstring)."""
    try:
        model, rest = model_and_rest(key)
    except ValueError:
        return NO_CLASS, key
    return model.replace(".", "_").replace("/", "."), rest


def _seconds(t: dict) -> float:
    render = t.get("render_s")
    compare = t.get("compare_s")
    total = (render if isinstance(render, (int, float)) else 0.0) + (compare if isinstance(compare, (int, float))
                                                                      else 0.0)
    return max(total, 1e-6)


def _fmt(seconds: float) -> str:
    return f"{seconds:.6f}"


def attachment_path(path: str | Path, environ=None) -> str:
    """An attachment's path as CI reads it: relative to $CI_PROJECT_DIR (GitLab) when that is set
    and holds the file, else absolute (Jenkins)."""
    env = os.environ if environ is None else environ
    p = Path(path).absolute()
    project = env.get("CI_PROJECT_DIR")
    if project:
        try:
            return p.relative_to(Path(project).absolute()).as_posix()
        except ValueError:
            pass
    return str(p)


def _out_lines(t: dict, attachments: list[str]) -> list[str]:
    """The lines of a case's <system-out>: the metrics line, the marks, the attachments."""
    out = {"status": t["status"], "match": t.get("match"), "metrics": t.get("metrics"),
           "thresholds": t.get("thresholds"), "golden": (t.get("golden") or {}).get("digest"),
           "env": t.get("env"), "render_s": t.get("render_s"), "compare_s": t.get("compare_s"),
           "missing": t.get("missing") or []}
    lines = [json.dumps(out, sort_keys=True, ensure_ascii=False)]
    if t.get("missing"):
        lines.append(f"missing assets (drawn as placeholders): {', '.join(t['missing'])}")
    if t.get("golden_note"):
        lines.append(t["golden_note"])
    return lines + [f"[[ATTACHMENT|{a}]]" for a in attachments]


def _case(t: dict, kind: str | None, lines: list[str]) -> ET.Element:
    classname, name = case_names(t["key"])
    case = ET.Element("testcase", classname=_x(classname), name=_x(name), time=_fmt(_seconds(t)))
    message = t.get("reason") or t["status"]
    if kind == "failure":
        el = ET.SubElement(case, "failure", type=t["status"], message=_x(message))
        el.text = _x(message)
    elif kind == "error":
        el = ET.SubElement(case, "error", type="error", message=_x(message))
        el.text = _x(message)
    elif kind == "skipped":
        ET.SubElement(case, "skipped", message=_x(f"{t['status']}: {message}"))
    ET.SubElement(case, "system-out").text = _x("\n".join(lines))
    return case


def _cdata(text: str) -> str:
    """Text as ElementTree writes it."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _attr(text: str) -> str:
    """An attribute's value as ElementTree writes it."""
    return (_cdata(text).replace('"', "&quot;").replace("\r", "&#13;").replace("\n", "&#10;")
            .replace("\t", "&#09;"))


def _case_text(t: dict, kind: str | None, attachments: list[str]) -> str:
    """A test case as the document's lines. A passed one with its metrics line alone (nearly every case of a
    large run) is written directly, the bytes ElementTree writes for it (tests/test_compare_scale.py), at a
    fifth of the cost; any other through ElementTree."""
    lines = _out_lines(t, attachments)
    if kind is None and len(lines) == 1:
        classname, name = case_names(t["key"])
        return (f'  <testcase classname="{_attr(_x(classname))}" name="{_attr(_x(name))}"'
                f' time="{_fmt(_seconds(t))}">\n   <system-out>{_cdata(_x(lines[0]))}</system-out>\n  </testcase>\n')
    case = _case(t, kind, lines)
    ET.indent(case, space=" ", level=2)
    return "  " + ET.tostring(case, encoding="unicode") + "\n"


def _attachments(t: dict, out_dir: Path | None) -> list[str]:
    """The images of a trace that is not a pass, in the report folder: new frame, golden, heatmap."""
    if out_dir is None or t["status"] in PASSING:
        return []
    g = t.get("golden") or {}
    paths = [image_relpath(t["png"]) if t.get("png") else None, image_relpath(g["png"]) if g.get("png") else None,
             heatmap_relpath(t["diff_image"]) if t.get("diff_image") else None]
    return [attachment_path(out_dir / p) for p in paths if p and (out_dir / p).is_file()]


def junit_chunks(results: dict, out_dir: str | Path | None = None):
    """The JUnit document of a comparison in pieces, one test case at a time (two passes over the
    traces: the counts first). `out_dir`: the report folder its images were put in (the attachments;
    without it there are none)."""
    traces = results["traces"].values()
    allow_new = bool(results.get("allow_new"))
    out_dir = Path(out_dir) if out_dir is not None else None
    n = {"failure": 0, "error": 0, "skipped": 0, "passed": 0}
    total = 0.0
    for t in traces:
        n[outcome(t["status"], allow_new)] = n.get(outcome(t["status"], allow_new), 0) + 1
        total += _seconds(t)
    root = ET.Element("testsuites", name="modelfarm", tests=str(len(traces)), failures=str(n["failure"]),
                      errors=str(n["error"]), time=_fmt(total))
    suite = ET.SubElement(root, "testsuite", name=_x(results.get("job")), tests=str(len(traces)),
                          failures=str(n["failure"]), errors=str(n["error"]), skipped=str(n["skipped"]),
                          time=_fmt(total), timestamp=_x(results.get("created")))
    props = ET.SubElement(suite, "properties")
    items = [("kind", results.get("kind")), ("run", results.get("job")), ("store", results.get("store")),
             ("verdict", results.get("verdict"))]
    if results.get("kind") == "diff":
        items += [("base", results["base"]["job"]), ("head", results["head"]["job"])]
    else:
        items += [("goldens", results.get("goldens")), ("allow_new", str(allow_new).lower())]
    for name, value in items:
        ET.SubElement(props, "property", name=name, value=_x(value))
    ET.indent(root, space=" ")
    head = ET.tostring(root, encoding="unicode")
    cut = head.index("</testsuite>")
    yield '<?xml version="1.0" encoding="UTF-8"?>\n' + head[:cut].rstrip(" ")
    for t in traces:
        yield _case_text(t, outcome(t["status"], allow_new), _attachments(t, out_dir))
    yield " " + head[cut:] + "\n"


def junit_xml(results: dict, out_dir: str | Path | None = None) -> str:
    """The JUnit document of a comparison as one string (write_junit writes it in pieces)."""
    return "".join(junit_chunks(results, out_dir))


def write_junit(path: str | Path, results: dict, out_dir: str | Path | None = None) -> None:
    """Write junit.xml in pieces (memory does not grow with the traces), atomically."""
    write_chunks(path, junit_chunks(results, out_dir))
