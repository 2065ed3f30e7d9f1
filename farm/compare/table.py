"""A comparison's traces (`results["traces"]`), with memory that does not grow by a dict a passing trace.

A trace that matches its golden exactly (nearly every trace of a large run) is held as one tuple of its
own values (`ResultTable._pack`): the values every such trace shares (its golden's approval: scope, who,
when, run, environment, marks; its metrics but the digests; thresholds) are one object each, shared; the
rest (the PNG and pixel digests, size, times) are the row's. Any other trace is held as the dict it is.
`table[key]` gives the trace's result as the dict the comparison made (farm.compare.runs), a new one on
each read (any other trace: the dict held): change a trace by putting a new dict (`table[key] = result`),
never by changing what a read returned. `ordered(keys)` reads a list of keys lazily (a report's pages
and filmstrips hold keys, not results). `json_lines()` writes the entries as farm.files.json_wide_chunks
would (sorted by key).
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping, MutableMapping, Sequence

__all__ = ["LazyTraces", "ResultTable"]

_TRACE = ("key", "model", "sequence", "time_ms", "status", "match", "reason", "png", "digest", "size", "env",
          "golden", "metrics", "thresholds", "diff_image", "ssim_image", "render_s", "compare_s", "blank", "missing",
          "golden_note")
_GOLDEN = ("digest", "png", "scope", "scope_env", "by", "at", "run", "env", "path", "missing", "blank")
_METRICS = ("status", "ssim", "ssim_rgb", "ssim_alpha", "pixels_over", "max_diff", "reason", "digest",
            "golden_digest", "size", "golden_size", "thresholds", "checks")
_TRACE_FIELDS, _GOLDEN_FIELDS, _METRICS_FIELDS = set(_TRACE), set(_GOLDEN), set(_METRICS)
_dumps = json.JSONEncoder(sort_keys=True, ensure_ascii=False, separators=(",", ":")).encode


class ResultTable(MutableMapping):
    """trace key -> result (see the module docstring); iterates in the order keys were first put."""

    def __init__(self, items=()):
        self._rows: dict[str, tuple | dict] = {}
        self._shared: dict = {}  # interned golden approvals, metrics, sizes
        for k, v in (items.items() if isinstance(items, Mapping) else items):
            self[k] = v

    def __len__(self) -> int:
        return len(self._rows)

    def __iter__(self) -> Iterator[str]:
        return iter(self._rows)

    def __contains__(self, key) -> bool:
        return key in self._rows

    def __delitem__(self, key: str) -> None:
        del self._rows[key]

    def __getitem__(self, key: str) -> dict:
        row = self._rows[key]
        return row if type(row) is dict else self._unpack(key, row)

    def __setitem__(self, key: str, result: dict) -> None:
        self._rows[key] = self._pack(key, result) or result

    def ordered(self, keys: Sequence[str]) -> LazyTraces:
        return LazyTraces(self, keys)

    def json_lines(self) -> Iterator[str]:
        for k in sorted(self._rows):
            yield f"{_dumps(k)}: {_dumps(self[k])}"

    def _share(self, value):
        return self._shared.setdefault(value, value)

    def _canonical(self, d: dict) -> dict:
        """One dict for every equal thresholds or checks dict (results read back from JSON have one each)."""
        return self._shared.setdefault(("json", _dumps(d)), d)

    def _pack(self, key: str, r: dict) -> tuple | None:
        """An exact pass as a row; None for anything else (or anything shaped otherwise: kept as a dict)."""
        if (r.keys() != _TRACE_FIELDS or r["key"] != key or r["status"] != "pass" or r["match"] != "exact"
                or r["reason"] is not None or r["diff_image"] is not None or r["ssim_image"] is not None
                or r["golden_note"] is not None or type(r["size"]) is not list or type(r["missing"]) is not list):
            return None
        g, m, digest, png = r["golden"], r["metrics"], r["digest"], r["png"]
        if (type(g) is not dict or type(m) is not dict or g.keys() != _GOLDEN_FIELDS or m.keys() != _METRICS_FIELDS
                or g["digest"] != digest or m["digest"] != digest or m["golden_digest"] != digest
                or type(g["png"]) is not str or type(g["missing"]) is not list or type(g["path"]) is not str
                or not g["path"].endswith(f"{g['png']}.png") or type(r["thresholds"]) is not dict
                or type(m["checks"]) is not dict or m["thresholds"] != r["thresholds"]):
            return None
        sizes = [m["size"], m["golden_size"]]
        if any(s is not None and type(s) is not list for s in sizes):
            return None
        thresholds = r["thresholds"] if m["thresholds"] is r["thresholds"] else self._canonical(r["thresholds"])
        checks = m["checks"] if m["thresholds"] is r["thresholds"] else self._canonical(m["checks"])
        approval = self._template((g["scope"], g["scope_env"], g["by"], g["at"], g["run"], g["env"],
                                   tuple(g["missing"]), g["blank"]), g, ("digest", "png", "path"))
        metrics = self._template((m["status"], m["ssim"], m["ssim_rgb"], m["ssim_alpha"], m["pixels_over"],
                                  m["max_diff"], m["reason"], *(None if s is None else tuple(s) for s in sizes),
                                  id(thresholds), id(checks)), {**m, "thresholds": thresholds, "checks": checks},
                                 ("digest", "golden_digest"))
        return (r["model"], r["sequence"], r["time_ms"], png, digest, self._share(tuple(r["size"])), r["env"],
                png if g["png"] == png else g["png"], approval, metrics, r["render_s"], r["compare_s"], r["blank"],
                tuple(r["missing"]), self._share(g["path"][:-len(g["png"]) - 4]))

    def _template(self, values: tuple, d: dict, own: tuple[str, ...]) -> dict:
        """The one dict shared by every row whose `d` has these `values` (its `own` fields, each row's, left
        None), its fields in the order the comparison writes them; `values` name the shared objects
        (thresholds, checks) by id: the template holds them."""
        template = self._shared.get(values)
        if template is None:
            order = _GOLDEN if "scope" in d else _METRICS
            template = {k: tuple(d[k]) if type(d[k]) is list else d[k] for k in order}  # never a row's own list
            template = self._shared[values] = {**template, **dict.fromkeys(own)}
        return template

    def _unpack(self, key: str, row: tuple) -> dict:
        model, sequence, time_ms, png, digest, size, env, gpng, approval, metrics, render_s, compare_s, blank, \
            missing, folder = row
        golden = dict(approval)  # the shared template's copy: its lists copied too, so a reader's change stays its own
        golden["digest"], golden["png"], golden["path"] = digest, gpng, f"{folder}{gpng}.png"
        golden["missing"] = list(golden["missing"])
        m = dict(metrics)
        m["digest"] = m["golden_digest"] = digest
        if m["size"] is not None:
            m["size"] = list(m["size"])
        if m["golden_size"] is not None:
            m["golden_size"] = list(m["golden_size"])
        return {
            "key": key, "model": model, "sequence": sequence, "time_ms": time_ms, "status": "pass", "match": "exact",
            "reason": None, "png": png, "digest": digest, "size": list(size), "env": env, "golden": golden,
            "metrics": m, "thresholds": m["thresholds"], "diff_image": None, "ssim_image": None,
            "render_s": render_s, "compare_s": compare_s, "blank": blank, "missing": list(missing),
            "golden_note": None,
        }


class LazyTraces(Sequence):
    """Traces of a `ResultTable` by key, each read when it is reached (never all held as dicts)."""

    def __init__(self, table: Mapping, keys: Sequence[str]):
        self.table, self.keys = table, keys

    def __len__(self) -> int:
        return len(self.keys)

    def __getitem__(self, i):
        if isinstance(i, slice):
            return LazyTraces(self.table, self.keys[i])
        return self.table[self.keys[i]]

    def __iter__(self) -> Iterator[dict]:
        table = self.table
        return (table[k] for k in self.keys)
