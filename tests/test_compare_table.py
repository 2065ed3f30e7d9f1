"""farm.compare.table.ResultTable: an exact pass held as a tuple reads back as the very dict the comparison
made (and as the one JSON gives back: keys sorted, thresholds and checks one dict each), a new one on each
read; any other trace is held as its dict."""

from __future__ import annotations

import io
import json

from farm.compare.table import ResultTable
from farm.files import json_wide_chunks, read_wide_json

TH = {"min_ssim": 0.99, "max_pixels_over": 0.001, "pixel_delta": 8}
CHECKS = {"ssim": {"name": "SSIM", "value": 1.0, "limit": ">= 0.99", "passed": True}}


def _exact(i: int, th: dict = TH, checks: dict = CHECKS) -> dict:
    digest, png = f"{i:064x}", f"{i + 7:064x}"
    return {
        "key": f"models/m{i}.mdx|Stand|{i}ms|auto|8x8|msaa0|team0|transparent", "model": f"models/m{i}.mdx",
        "sequence": "Stand", "time_ms": i, "status": "pass", "match": "exact", "reason": None, "png": png,
        "digest": digest, "size": [8, 8], "env": "llvmpipe / Mesa / x",
        "golden": {"digest": digest, "png": png if i % 2 else f"{i + 9:064x}", "scope": "generic", "scope_env": "*",
                   "by": "me <m@x>", "at": "2026-01-01", "run": "a", "env": "llvmpipe / Mesa / x",
                   "path": f"/g/images/{png if i % 2 else f'{i + 9:064x}'}.png", "missing": [], "blank": None},
        "metrics": {"status": "identical", "ssim": 1.0, "ssim_rgb": 1.0, "ssim_alpha": 1.0, "pixels_over": 0.0,
                    "max_diff": 0, "reason": None, "digest": digest, "golden_digest": digest, "size": [8, 8],
                    "golden_size": [8, 8], "thresholds": th, "checks": checks},
        "thresholds": th, "diff_image": None, "ssim_image": None, "render_s": 0.001 * i, "compare_s": 1e-5,
        "blank": None, "missing": [], "golden_note": None,
    }


def test_exact_passes_are_rows_that_read_back_whole():
    fail = {**_exact(99), "status": "fail", "match": None, "reason": "differs"}
    results = {t["key"]: t for t in [*map(_exact, range(6)), fail]}
    table = ResultTable(results.items())
    assert sum(type(r) is tuple for r in table._rows.values()) == 6 and table._rows[fail["key"]] is fail
    for k, r in results.items():
        got = table[k]
        assert got == r and list(got) == list(r) and list(got["golden"]) == list(r["golden"])
    one, two = list(results)[1:3]
    got = table[one]
    got["missing"].append("x.blp")
    got["golden"]["missing"].append("y.blp")
    got["metrics"]["size"][0] = 1
    assert table[one] == results[one] and table[two] == results[two]  # a read's change stays its own


def test_read_back_from_the_stored_document():
    results = {"format": "x", "traces": ResultTable((t["key"], t) for t in map(_exact, range(5)))}
    text = "".join(json_wide_chunks(results, "traces"))
    assert text == "".join(json_wide_chunks({**results, "traces": dict(results["traces"].items())}, "traces"))
    table = ResultTable()
    data = read_wide_json(io.BytesIO(text.encode()).read, {"traces": table.update})
    assert data["format"] == "x" and all(type(r) is tuple for r in table._rows.values())  # sorted keys, copies
    assert {k: table[k] for k in table} == json.loads(text)["traces"]
    shared = {id(table[k]["thresholds"]) for k in table} | {id(table[k]["metrics"]["thresholds"]) for k in table}
    assert len(shared) == 1  # one thresholds dict for every trace read back
