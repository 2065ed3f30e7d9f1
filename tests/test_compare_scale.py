"""Issue 33 item 1, the comparison at scale: a frame whose PNG bytes are an approved golden's is not
decoded (and its result is the one decoding gives), comparison.json is written in pieces, the PNG
header reader agrees with the decoder, thresholds are one shared dict per distinct value."""

from __future__ import annotations

import hashlib
import io
import json
import xml.etree.ElementTree as ET
from dataclasses import replace

import numpy as np
from golden_runs import broken, image, key, make_run, noisy
from PIL import Image

import farm.compare.runs as R
import farm.report.junit as J
from farm import goldens as G
from farm.compare.runs import compare_run
from farm.files import json_wide_bytes, json_wide_encoded
from farm.plan.keys import key_time_pct, legacy_key, parse_key
from farm.store import open_store
from renderer.png import png_bytes, read_png, read_png_header

K1, K2, K3, K4, K5 = (key(t=t) for t in (0, 100, 200, 300, 400))
BY = "Tess Tester <tess@example.org>"


def _blank() -> np.ndarray:
    return np.zeros((32, 32, 4), np.uint8)


def _frames() -> dict:
    return {K1: image(1), K2: _blank(), K3: image(3), K4: image(4), K5: image(5)}


def _comparable(results: dict) -> dict:
    return {k: {f: v for f, v in t.items() if f != "compare_s"} for k, t in results["traces"].items()}


def test_an_approved_png_is_not_decoded_and_gives_the_decoded_result(tmp_path, monkeypatch):
    gdir = tmp_path / "goldens"
    first = make_run(tmp_path / "store", _frames(), job_id="a")
    G.approve(gdir, first, sorted(first.traces), by=BY, allow_blank=True)
    head = {**_frames(), K3: noisy(image(3), 1), K4: broken(image(4))}  # K5 is new below
    run = make_run(tmp_path / "store", head, job_id="b")
    assert run.traces[K1]["digest"] == first.traces[K1]["digest"]  # the same bytes as the golden's
    G.reject(gdir, first, [K5], by=BY, reason="wrong")  # the same bytes, rejected: decoded for its blank mark
    decoded = set()
    real = R.read_png
    monkeypatch.setattr(R, "read_png", lambda data: decoded.add(hashlib.sha256(data).hexdigest()) or real(data))
    lazy = compare_run(run, gdir, write=False)
    # K3, K4 (they differ: compared with their goldens) and K5 (rejected: its blank mark), never K1 or K2
    assert {k for k, t in run.traces.items() if t["digest"] in decoded} == {K3, K4, K5}
    assert lazy["traces"][K1]["status"] == "pass" and lazy["traces"][K2]["blank"] == "fully transparent"
    assert lazy["traces"][K5]["status"] == "rejected" and lazy["traces"][K4]["status"] == "fail"
    monkeypatch.setattr(R, "read_png_header", lambda data: None)  # every frame decoded, as before
    assert _comparable(compare_run(run, gdir, write=False)) == _comparable(lazy)


def test_a_corrupt_frame_behind_a_readable_header_is_the_traces_error(tmp_path):
    gdir = tmp_path / "goldens"
    first = make_run(tmp_path / "store", {K1: image(1)}, job_id="a")
    G.approve(gdir, first, [K1], by=BY)
    run = make_run(tmp_path / "store", {K1: image(2)}, job_id="b")
    path = run.store.image_path(run.traces[K1]["digest"])
    data = path.read_bytes()
    cut = data.index(b"IDAT") + 8
    path.write_bytes(data[:cut] + b"\0" * 16 + data[cut + 16:])
    t = compare_run(run, gdir, write=False)["traces"][K1]
    assert t["status"] == "error" and run.traces[K1]["digest"][:12] in t["reason"]  # as before: not the run's


def test_thresholds_are_one_shared_dict_and_written_the_same(tmp_path):
    gdir = tmp_path / "goldens"
    first = make_run(tmp_path / "store", {K1: image(1), K2: image(2)}, job_id="a")
    G.approve(gdir, first, sorted(first.traces), by=BY)
    results = compare_run(first, gdir)
    t1, t2 = results["traces"][K1], results["traces"][K2]
    assert t1["thresholds"] is t2["thresholds"] is t1["metrics"]["thresholds"]
    assert t1["metrics"]["checks"] is t2["metrics"]["checks"]
    stored = first.store.read_artefact(first.id, "comparison.json")
    assert stored == json_wide_bytes(results, "traces") and json.loads(stored)["traces"][K1]["status"] == "pass"


def test_an_artefact_in_pieces_is_the_same_bytes_in_every_store(tmp_path):
    doc = {"format": "x", "traces": {f"k{i}": {"n": i, "s": "é\udcb0"} for i in range(5)}}
    for location in (str(tmp_path / "folder"), "mem://pieces"):
        store = open_store(location)
        store.put_artefact("j", "doc.json", json_wide_encoded(doc, "traces"))
        assert store.read_artefact("j", "doc.json") == json_wide_bytes(doc, "traces")


def test_the_header_reader_agrees_with_the_decoder():
    rgba = image(7)
    data = png_bytes(rgba, {"gl": {"renderer": "x"}, "key": "k|é"})
    assert read_png_header(data) == ((32, 32), read_png(data)[1])
    buf = io.BytesIO()
    Image.fromarray(rgba, "RGBA").save(buf, "PNG")
    assert read_png_header(buf.getvalue()) == ((32, 32), None)  # no trace: the caller decodes
    assert read_png_header(b"not a png") is None


def test_the_quick_key_readers_agree_with_parse_key():
    keys = [key(), key("models/100%25%7Cx.mdx", "50%25", 500),
            "models/a.mdx|Stand|50%|auto|32x32|msaa0|team0|transparent",
            "models/a%25.mdx|Wa%7Clk|12.5%|auto|32x32|msaa0|team0|transparent|white"]
    for k in keys:
        parsed = parse_key(k)
        assert key_time_pct(k) == parsed.time_pct
        assert legacy_key(k, 700) == (None if parsed.time_pct is None else str(replace(parsed, time_ms=700,
                                                                                       time_pct=None)))


def test_a_passed_case_written_directly_is_what_elementtree_writes():
    hostile = 'models/a&b<c>"d\'.mdx|Wa\tl\rk\n&amp;|0ms|auto|32x32|msaa0|team0|transparent'
    for k in (key(), hostile, "not a key <&>\"\x01"):
        t = {"key": k, "status": "pass", "match": "exact", "metrics": {"note": "<&> \"q\" \x02 é"},
             "thresholds": {"min_ssim": 0.99}, "golden": {"digest": "d"}, "env": 'e "<&>"', "render_s": 0.25,
             "compare_s": 0.001}
        case = J._case(t, None, J._out_lines(t, []))
        ET.indent(case, space=" ", level=2)
        assert J._case_text(t, None, []) == "  " + ET.tostring(case, encoding="unicode") + "\n"
