"""A job's traces in columns (farm.plan.traces.TraceTable) read and write as the dicts they replace,
and a job document written one trace a line reads back the same, a line at a time or whole."""

import io
import json
import random

import pytest

from farm.files import json_bytes, json_wide_chunks, read_wide_json
from farm.plan.traces import TraceTable
from farm.store import StoreError, open_store

DIGEST = "0123456789abcdef" * 4
SHARED = {"ssim": 0.99, "max_pixel_delta": 2}


def _traces(n: int, seed: int = 7) -> dict:
    """Traces as a job holds them, with every field and value type a document may carry."""
    rnd = random.Random(seed)
    out = {}
    for i in range(n):
        t = {"model": f"m{i % 5}.mdx", "sequence": rnd.choice(["Stand", "Walk", None]),
             "time_ms": rnd.randrange(0, 2 ** 40), "batch": f"b{i // 3}",
             "thresholds": SHARED if i % 2 else {"ssim": 1.0}, "status": rnd.choice(["pending", "done", "failed"]),
             "attempts": rnd.randrange(0, 4), "digest": rnd.choice([None, DIGEST, rnd.randbytes(32).hex()]),
             "error": rnd.choice([None, "boom", f"frame {i} \u202e failed"])}
        if i % 7 == 0:
            t["missing"] = ["Textures/a.blp", f"x{i}.blp"]
        if i % 4 == 0:
            t["render_s"] = rnd.random()
        if i % 11 == 0:
            t["cause"] = "unloadable"
        if i % 13 == 0:  # what a newer writer added, and values of another type than their column's
            t.update(future={"a": [1, 2]}, attempts=True, time_ms=1.5, digest="ABCDEF", render_s=3)
        out[f"models/m{i % 5}.mdx|Stand|{i}ms|auto|8x8|msaa0|team0|transparent"] = t
    return out


def test_a_table_reads_back_every_trace_as_written_with_its_types():
    plain = _traces(500)
    table = TraceTable(plain)
    assert len(table) == len(plain) and list(table) == list(plain)
    for key, t in plain.items():
        got = dict(table[key])
        assert got == t
        assert {k: type(v) for k, v in got.items()} == {k: type(v) for k, v in t.items()}, key
        assert dict(table[key]) == t and table[key] == t
    assert json.loads("".join(json_wide_chunks({"traces": table}, "traces"))) == \
        json.loads("".join(json_wide_chunks({"traces": plain}, "traces")))


def test_a_block_taken_at_once_is_the_table_taken_a_trace_at_a_time():
    plain = _traces(400, seed=11)
    one_by_one = TraceTable(plain)
    keys = list(plain)
    at_once = TraceTable({k: {"status": "pending", "stale": 1} for k in keys[:50]})  # some there already
    at_once.add({k: plain[k] for k in keys[:200]})
    at_once.add({k: plain[k] for k in keys[200:]})
    assert list(at_once) == keys
    for k in keys:
        got = dict(at_once[k])
        assert got == dict(one_by_one[k]) == plain[k], k
        assert {n: type(v) for n, v in got.items()} == {n: type(v) for n, v in plain[k].items()}, k


def test_a_trace_view_writes_through_and_deletes():
    table = TraceTable(_traces(20))
    key = next(iter(table))
    t = table[key]
    t.update(status="done", digest=DIGEST, error=None, render_s=0.25)
    t["missing"] = ["a.blp"]
    t.pop("cause", None)
    del t["attempts"]
    assert table[key]["status"] == "done" and table[key]["digest"] == DIGEST and table[key]["missing"] == ["a.blp"]
    assert "attempts" not in table[key] and table[key].get("attempts", 9) == 9
    with pytest.raises(KeyError):
        del table[key]["attempts"]
    table[key]["missing"].append("b.blp")  # a copy: the row is not changed behind the table's back
    assert table[key]["missing"] == ["a.blp"]
    table[key] = table[key]  # a row given to itself stays whole
    assert table[key]["missing"] == ["a.blp"] and table[key]["digest"] == DIGEST
    del table[key]
    assert key not in table and len(table) == 19 and key not in table.keys_where("status", "done")
    table[key] = {"status": "pending"}
    assert list(table)[-1] == key and dict(table[key]) == {"status": "pending"}


def test_counts_and_selections_come_from_the_columns():
    plain = _traces(300)
    table = TraceTable(plain)
    statuses = [t["status"] for t in plain.values()]
    assert table.tally("status") == {s: statuses.count(s) for s in set(statuses)}
    assert table.keys_where("status", "failed") == [k for k, t in plain.items() if t["status"] == "failed"]
    assert table.keys_with("missing") == [k for k, t in plain.items() if "missing" in t]
    pending = {t["batch"] for t in plain.values() if t["status"] == "pending"}
    assert table.distinct("batch", "status", "pending") == pending
    assert table.keys_where("status", "nothing like it") == []


def test_one_thresholds_object_shared_by_many_traces_is_held_once():
    shared = {"ssim": 0.5}
    table = TraceTable()
    for i in range(1000):
        table[f"k{i}"] = {"thresholds": shared, "status": "pending"}
    assert table["k999"]["thresholds"] is shared
    assert len(table._values) == 2  # the thresholds and "pending": values are kept once, numbered


def _wide(doc: dict) -> bytes:
    return "".join(json_wide_chunks(doc, ("batches", "traces"))).encode()


@pytest.mark.parametrize("block", [1, 7, 100, 1 << 22])
def test_a_wide_document_reads_in_pieces_as_it_reads_whole(block):
    doc = {"format": "x", "batches": {"b1": {"keys": ["k1"]}, "b0": {"keys": []}}, "traces": _traces(50),
           "long": "y" * 300, "z": [1], "empty": {}}
    got: dict = {"batches": {}, "traces": {}, "empty": {}}
    rest = read_wide_json(io.BytesIO(_wide(doc)).read, {n: got[n].update for n in got}, block=block)
    assert {**rest, **got} == doc == json.loads(_wide(doc))
    assert rest["traces"] == {} and rest["batches"] == {}


@pytest.mark.parametrize("block", [5, 1 << 22])
def test_an_indented_or_cut_document_is_not_taken_for_a_wide_one(block):
    doc = {"traces": {"k": {"status": "done", "a": 1}, "k2": {"status": "done"}}}
    for data in (json_bytes(doc), _wide(doc)[:-8], _wide(doc)[:-4] + b"x}\n"):
        with pytest.raises(ValueError):
            read_wide_json(io.BytesIO(data).read, {"traces": lambda entries: None}, block=block)
    repeated = _wide(doc).replace(b'"k2"', b'"k"')  # as json.loads reads it: the last one stands
    got: dict = {}
    try:
        read_wide_json(io.BytesIO(repeated).read, {"traces": got.update}, block=block)
    except ValueError:  # a block that holds both is not one entry a line: the caller reads it whole
        got = json.loads(repeated)["traces"]
    assert got == json.loads(repeated)["traces"] == {"k": {"status": "done"}}


def _job(n: int) -> dict:
    traces = _traces(n)
    batches = {}
    for k, t in traces.items():
        batches.setdefault(t["batch"], {"id": t["batch"], "keys": []})["keys"].append(k)
    return {"format": "modelfarm.job/1", "job": "j", "runs": [], "batches": batches, "traces": traces}


def test_the_store_reads_a_job_a_line_at_a_time_into_a_table(tmp_path):
    store = open_store(tmp_path / "out")
    doc = _job(200)
    store.write_job("j", {**doc, "traces": TraceTable(doc["traces"])})
    raw = (tmp_path / "out" / "jobs" / "j.json").read_bytes()
    assert raw.count(b"\n") > 200 and json.loads(raw) == doc  # one trace a line, and plain JSON
    table = TraceTable()
    got = store.read_job("j", traces=table)
    assert got["traces"] is table and {k: dict(table[k]) for k in table} == doc["traces"]
    assert got["batches"] == doc["batches"] and got["runs"] == []
    key = next(iter(table))
    assert got["batches"][table[key]["batch"]]["keys"][0] is key  # one string, not two


def test_an_older_indented_job_document_still_reads(tmp_path):
    store = open_store(tmp_path / "out")
    doc = _job(30)
    (tmp_path / "out" / "jobs").mkdir(parents=True)
    (tmp_path / "out" / "jobs" / "j.json").write_bytes(json_bytes(doc))
    table = TraceTable()
    got = store.read_job("j", traces=table)
    assert {k: dict(table[k]) for k in table} == doc["traces"] and got["batches"] == doc["batches"]


def test_a_damaged_trace_line_is_named_and_a_cut_document_is_not_json(tmp_path):
    store = open_store(tmp_path / "out")
    doc = _job(30)
    store.write_job("j", doc)
    path = tmp_path / "out" / "jobs" / "j.json"
    lines = path.read_bytes().splitlines(keepends=True)
    whole = list(lines)
    i = next(i for i, line in enumerate(lines) if b'"status":"' in line)
    key = json.loads(b"{" + lines[i].strip().rstrip(b",") + b"}").popitem()[0]
    lines[i] = lines[i].replace(b'"status":"', b'"status":"bogus-')
    path.write_bytes(b"".join(lines))
    with pytest.raises(StoreError, match=f"trace {key!r} has status 'bogus-"):
        store.read_job("j", traces=TraceTable())
    path.write_bytes(b"".join(whole[: len(whole) // 2]))
    with pytest.raises(StoreError, match="not valid JSON"):
        store.read_job("j", traces=TraceTable())


def _uniform(n: int, odd: tuple | None = None) -> dict:
    """Blocks as a planned or finished job's document holds them: every value of its column's type
    (the column-at-a-time path), or with one `odd` (field, value) in the middle (the checked path)."""
    out = {f"m.mdx|Stand|{i}ms": {"time_ms": 20 * i, "attempts": 1, "render_s": 0.001 * (i + 1),
                                  "digest": f"{i:064x}", "thresholds": {}, "status": "done", "batch": "b"}
           for i in range(n)}
    if odd is not None:
        out[f"m.mdx|Stand|{n // 2}ms"][odd[0]] = odd[1]
    return out


@pytest.mark.parametrize("odd", [None, ("time_ms", True), ("time_ms", -(2 ** 63)), ("attempts", 2 ** 63),
                                 ("time_ms", 1.0), ("render_s", float("nan")), ("render_s", 2),
                                 ("digest", "A" * 64), ("digest", "ab " * 21 + "a"), ("digest", None),
                                 ("digest", "0" * 63), ("thresholds", {"ssim": 0.9}), ("thresholds", [])])
def test_a_uniform_block_and_one_with_an_odd_value_read_back_as_written(odd):
    plain = _uniform(300, odd)
    at_once = TraceTable()
    at_once.add(plain)
    for k, t in plain.items():
        got = dict(at_once[k])
        assert json.dumps(got, sort_keys=True) == json.dumps(t, sort_keys=True), k
        assert got == dict(TraceTable({k: t})[k]), k
        assert {n: type(v) for n, v in got.items()} == {n: type(v) for n, v in t.items()}, k


def test_a_job_read_without_its_batches_has_the_same_traces_and_no_batch(tmp_path):
    store = open_store(tmp_path / "out")
    doc = _job(120)
    store.write_job("j", {**doc, "traces": TraceTable(doc["traces"])})
    (tmp_path / "out" / "jobs" / "old.json").write_bytes(json_bytes({**doc, "job": "old"}))  # indented: read whole
    for job in ("j", "old"):
        table = TraceTable()
        got = store.read_job(job, traces=table, batches=False)
        assert got["batches"] == {} and {k: dict(table[k]) for k in table} == doc["traces"], job
