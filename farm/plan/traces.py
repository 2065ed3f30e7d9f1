"""Every trace of a job in columns: a million planned frames in about 250 MB, not a gigabyte of dicts.

A job (farm.run.jobs.JobState) and a plan (farm.plan.batches.Plan) keep, per trace key, a handful of
fields: what planning decided (model, sequence, time_ms, batch, thresholds[, cause, error]) and what
running changed (status, digest, error, attempts, missing, render_s). As one dict a trace that is
about 700 bytes, and the coordinator of a million-frame job held several gigabytes. `TraceTable` is
the same mapping (key -> a mutable mapping of fields, in insertion order) with each field a column:

- values that repeat (model, sequence, batch, status, thresholds, cause, error, missing) are numbers
  into the table's list of distinct values: a column of 4-byte numbers;
- integers (time_ms, attempts) an array of 8-byte integers, render_s an array of doubles;
- digests 32 bytes each (a sha256's hex read back from them);
- anything else (a field this module does not know, a value of another type than its column's: what
  a newer writer added) is kept as it is in a dict of the row's extra fields, so it passes through.

`table[key]` is a `Trace`, a view of one row: reading and writing it reads and writes the columns
(`trace.update(status="done")`, `trace.get("missing")`, `dict(trace)`); a value read is what was
written, of the same type (a list written to ``missing`` reads back as an equal list, not the same one).
"""

from __future__ import annotations

import json
import math
from array import array
from collections.abc import Iterator, Mapping, MutableMapping

__all__ = ["Trace", "TraceTable"]

_ABSENT = object()
_NO_INT = -(2 ** 63)  # an integer column's "absent"
_SHARED = ("model", "sequence", "batch", "status", "thresholds", "cause", "error", "missing")
_INTS = ("time_ms", "attempts")
_HEX = frozenset("0123456789abcdef")
_EMPTY_DICT = ("dict",)
_BLOCK = 4096  # rows the columns grow by
_EMPTY_SHARED = array("i", [-1] * _BLOCK)
_EMPTY_INTS = array("q", [_NO_INT] * _BLOCK)
_EMPTY_FLOATS = array("d", [math.nan] * _BLOCK)


def _shared_key(value):
    """How a repeated value is told apart from another, the type included (1, True and 1.0 are
    different values in a document): a string or None is its own key; a flat dict (thresholds) its
    items and their types; anything else its JSON."""
    kind = type(value)
    if kind is str or value is None:
        return value
    if kind is dict:
        if not value:
            return _EMPTY_DICT
        try:
            return ("dict", *((k, v.__class__, v) for k, v in sorted(value.items())))
        except TypeError:  # a value that is not hashable, or keys that do not sort
            pass
    return ("json", kind.__name__, json.dumps(value, sort_keys=True))


def _int_fits(value) -> bool:
    return type(value) is int and _NO_INT < value < 2 ** 63


def _float_fits(value) -> bool:
    return type(value) is float and not math.isnan(value)


def _all_fit(values: list, code: str) -> bool:
    """Whether every value goes into an array of `code` as it is ("q": an int, not bool, other than
    the column's absent; "d": a float that is not NaN), checked a column at a time."""
    if not values:
        return True
    if code == "q":
        return set(map(type, values)) == {int} and _NO_INT < min(values) and max(values) < 2 ** 63
    return set(map(type, values)) == {float} and not any(map(math.isnan, values))


def _digest_fits(value) -> bool:
    return type(value) is str and len(value) == 64 and _HEX.issuperset(value)


class TraceTable(MutableMapping):
    """Trace key -> `Trace` (see the module's docstring)."""

    def __init__(self, traces: Mapping | None = None):
        self._rows: dict[str, int] = {}
        self._keys: list[str | None] = []
        self._values: list = []  # the distinct repeated values; a column holds their numbers (-1: absent)
        self._numbers: dict = {}  # _shared_key(value) -> its number
        self._by_id: dict[int, tuple] = {}  # id of a dict value seen -> (the dict, its number)
        self._shared = {name: array("i") for name in _SHARED}
        self._ints = {name: array("q") for name in _INTS}
        self._render_s = array("d")
        self._digest = bytearray()
        self._digest_state = bytearray()  # 0: absent, 1: None, 2: the 32 bytes in _digest
        self._extra: dict[int, dict] = {}
        if traces:
            self.update(traces)

    # --- the mapping
    def __getitem__(self, key: str) -> Trace:
        return Trace(self, self._rows[key])

    def __setitem__(self, key: str, fields: Mapping) -> None:
        if isinstance(fields, Trace):  # a row of a table (this one's own, even): its fields first
            fields = dict(fields)
        row = self._rows.get(key)
        if row is None:
            row = self._rows[key] = self._new_row(key)
        else:
            self._clear(row)
        shared, numbers = self._shared, self._numbers
        for name, value in fields.items():
            column = shared.get(name)
            if column is None:
                self._set(row, name, value, fresh=True)
                continue
            number = numbers.get(value) if value is None or type(value) is str else None  # the common case
            column[row] = self._number(value) if number is None else number

    def add(self, traces: Mapping) -> None:
        """Take many traces at once (a block of a document read back): those new to the table are put
        in their rows a column at a time, the rest one by one as `table[key] = fields` would."""
        rows = self._rows
        new = {k: t for k, t in traces.items() if k not in rows}
        for key in traces.keys() - new.keys():
            self[key] = traces[key]
        if not new:
            return
        start = len(self._keys)
        self._grow(start + len(new))
        self._keys.extend(new)
        rows.update(zip(new, range(start, start + len(new)), strict=True))
        fields = list(new.values())
        names = set().union(*fields)
        for name in names & self._shared.keys():
            column = self._shared[name]
            column[start:start + len(fields)] = array("i", self._numbers_of([t.get(name, _ABSENT) for t in fields]))
        for name in names & self._ints.keys():
            self._pack(start, name, [t.get(name, _ABSENT) for t in fields], self._ints[name], "q", _int_fits, _NO_INT)
        if "render_s" in names:
            self._pack(start, "render_s", [t.get("render_s", _ABSENT) for t in fields], self._render_s, "d",
                       _float_fits, math.nan)
        if "digest" in names:
            self._pack_digests(start, [t.get("digest", _ABSENT) for t in fields])
        for name in names - self._shared.keys() - self._ints.keys() - {"render_s", "digest"}:  # the row's extras
            for row, t in enumerate(fields, start):
                if name in t:
                    self._extra.setdefault(row, {})[name] = t[name]

    def _pack(self, start: int, name: str, values: list, column: array, code: str, fits, absent) -> None:
        """A column's worth of values from `start`: those that `fits` into the column, the rest (but
        the absent) into their rows' extras."""
        if _all_fit(values, code):  # the common block: every value of the column's own type, none absent
            column[start:start + len(values)] = array(code, values)
            return
        column[start:start + len(values)] = array(code, [v if fits(v) else absent for v in values])
        for i in [i for i, v in enumerate(values) if v is not _ABSENT and not fits(v)]:
            self._extra.setdefault(start + i, {})[name] = values[i]

    def _pack_digests(self, start: int, values: list) -> None:
        if set(map(type, values)) == {str} and set(map(len, values)) == {64}:  # every one a digest, it seems
            joined = "".join(values)
            try:
                packed = bytes.fromhex(joined)
            except ValueError:
                packed = b""
            if packed.hex() == joined:  # lower-case hex only, no space: each reads back as written
                self._digest_state[start:start + len(values)] = b"\2" * len(values)
                self._digest[32 * start:32 * (start + len(values))] = packed
                return
        state = [0 if v is _ABSENT else 1 if v is None else 2 if _digest_fits(v) else 3 for v in values]
        self._digest_state[start:start + len(values)] = bytes(s if s < 3 else 0 for s in state)
        self._digest[32 * start:32 * (start + len(values))] = b"".join(
            bytes.fromhex(v) if s == 2 else bytes(32) for v, s in zip(values, state, strict=True))
        for i in [i for i, s in enumerate(state) if s == 3]:
            self._extra.setdefault(start + i, {})["digest"] = values[i]

    def _numbers_of(self, values: list) -> list[int]:
        """The numbers of a column's worth of repeated values (-1 for an absent one)."""
        numbers = self._numbers
        out = [numbers.get(v, -2) if v is None or type(v) is str else -2 for v in values]
        empty = None  # the number of {} (a trace's thresholds, most often), found once a block
        for i in [i for i, n in enumerate(out) if n == -2]:  # new in this block, absent, or not a string
            value = values[i]
            if value is _ABSENT:
                out[i] = -1
            elif type(value) is dict and not value:
                if empty is None:
                    empty = self._number(value)
                out[i] = empty
            else:
                number = numbers.get(value) if value is None or type(value) is str else None
                out[i] = self._number(value) if number is None else number
        return out

    def __delitem__(self, key: str) -> None:
        row = self._rows.pop(key)
        self._clear(row)
        self._keys[row] = None

    def __iter__(self) -> Iterator[str]:
        return iter(self._rows)

    def __len__(self) -> int:
        return len(self._rows)

    def __contains__(self, key) -> bool:
        return key in self._rows

    def key_object(self, key):
        """The table's own string object for `key` (a batch's list of keys shares them), else `key`."""
        row = self._rows.get(key)
        return key if row is None else self._keys[row]

    def tally(self, name: str) -> dict:
        """How many traces have each value of a repeated field (``status``): counted in its column."""
        counts: dict[int, int] = {}
        for number in self._shared[name]:
            counts[number] = counts.get(number, 0) + 1
        counts.pop(-1, None)
        return {self._values[number]: n for number, n in counts.items()}

    def keys_where(self, name: str, value) -> list[str]:
        """The keys of the traces whose repeated field `name` is `value`, in insertion order."""
        number = self._numbers.get(_shared_key(value))
        if number is None:
            return []
        keys = self._keys
        return [keys[row] for row, n in enumerate(self._shared[name]) if n == number]

    def keys_with(self, name: str) -> list[str]:
        """The keys of the traces that have the repeated field `name`, in insertion order."""
        keys = self._keys
        return [keys[row] for row, n in enumerate(self._shared[name]) if n >= 0]

    def distinct(self, name: str, where: str, value) -> set:
        """The values of the repeated field `name` among the traces whose field `where` is `value`
        (the batches of the pending traces), from the columns."""
        number = self._numbers.get(_shared_key(value))
        if number is None:
            return set()
        values = self._values
        pairs = zip(self._shared[name], self._shared[where], strict=True)
        return {values[n] for n, w in pairs if w == number and n >= 0}

    def json_lines(self, sort: bool = True) -> Iterator[str]:
        """Each trace as ``"key": {fields}`` (compact JSON, sorted fields; in key order when `sort`):
        the lines of a document's wide member (farm.files.json_wide_chunks' form)."""
        dumps = json.JSONEncoder(sort_keys=True, ensure_ascii=False, separators=(",", ":")).encode
        keys = sorted(self._rows) if sort else list(self._rows)
        for key in keys:
            yield f"{dumps(key)}: {dumps(self._row_dict(self._rows[key]))}"

    # --- rows
    def _new_row(self, key: str) -> int:
        row = len(self._keys)
        self._keys.append(key)
        if row >= len(self._render_s):
            self._grow(row + 1)
        return row

    def _grow(self, rows: int) -> None:
        """Room for `rows` rows: the columns grow a block of empty rows at a time."""
        while len(self._render_s) < rows:
            for column in self._shared.values():
                column.extend(_EMPTY_SHARED)
            for column in self._ints.values():
                column.extend(_EMPTY_INTS)
            self._render_s.extend(_EMPTY_FLOATS)
            self._digest.extend(bytes(32 * _BLOCK))
            self._digest_state.extend(bytes(_BLOCK))

    def _clear(self, row: int) -> None:
        for column in self._shared.values():
            column[row] = -1
        for column in self._ints.values():
            column[row] = _NO_INT
        self._render_s[row] = math.nan
        self._digest_state[row] = 0
        self._extra.pop(row, None)

    def _number(self, value) -> int:
        """The number of a repeated value (a new one is added): a dict seen before by its id first
        (a plan's thresholds: one object shared by many traces)."""
        kind = type(value)
        if kind is str or value is None:
            key = value
        else:
            if kind is dict:
                known = self._by_id.get(id(value))
                if known is not None and known[0] is value:
                    return known[1]
            key = _shared_key(value)
        number = self._numbers.get(key)
        if number is None:
            number = self._numbers[key] = len(self._values)
            self._values.append(value)
            if type(value) is dict:  # the value kept: its id stays its own while the table holds it
                self._by_id[id(value)] = (value, number)
        return number

    # --- fields (the `Trace` view's work)
    def _get(self, row: int, name: str):
        column = self._shared.get(name)
        if column is not None:
            number = column[row]
            if number >= 0:
                value = self._values[number]
                return json.loads(json.dumps(value)) if isinstance(value, list) else value
        elif name in self._ints:
            value = self._ints[name][row]
            if value != _NO_INT:
                return value
        elif name == "render_s":
            value = self._render_s[row]
            if not math.isnan(value):
                return value
        elif name == "digest":
            state = self._digest_state[row]
            if state:
                return None if state == 1 else self._digest[32 * row:32 * row + 32].hex()
        return self._extra.get(row, {}).get(name, _ABSENT)

    def _set(self, row: int, name: str, value, fresh: bool = False) -> None:
        """Set a field (`fresh`: the row has no fields yet, nothing to remove first)."""
        if not fresh:
            self._delete(row, name)
        if name in self._shared:
            self._shared[name][row] = self._number(value)
        elif name in self._ints and _int_fits(value):
            self._ints[name][row] = value
        elif name == "render_s" and _float_fits(value):
            self._render_s[row] = value
        elif name == "digest" and (value is None or _digest_fits(value)):
            self._digest_state[row] = 1 if value is None else 2
            if value is not None:
                self._digest[32 * row:32 * row + 32] = bytes.fromhex(value)
        else:
            self._extra.setdefault(row, {})[name] = value

    def _delete(self, row: int, name: str) -> bool:
        """Remove a field from a row; whether it was there."""
        was = self._get(row, name) is not _ABSENT
        if name in self._shared:
            self._shared[name][row] = -1
        elif name in self._ints:
            self._ints[name][row] = _NO_INT
        elif name == "render_s":
            self._render_s[row] = math.nan
        elif name == "digest":
            self._digest_state[row] = 0
        extra = self._extra.get(row)
        if extra is not None and name in extra:
            del extra[name]
            if not extra:
                del self._extra[row]
        return was

    def _row_dict(self, row: int) -> dict:
        """A row's fields as a new dict, in one pass over the columns."""
        out = {}
        values = self._values
        for name, column in self._shared.items():
            number = column[row]
            if number >= 0:
                value = values[number]
                out[name] = json.loads(json.dumps(value)) if isinstance(value, list) else value
        for name, column in self._ints.items():
            if column[row] != _NO_INT:
                out[name] = column[row]
        if not math.isnan(self._render_s[row]):
            out["render_s"] = self._render_s[row]
        state = self._digest_state[row]
        if state:
            out["digest"] = None if state == 1 else self._digest[32 * row:32 * row + 32].hex()
        out.update(self._extra.get(row, ()))
        return out

    def _names(self, row: int) -> Iterator[str]:
        for name, column in self._shared.items():
            if column[row] >= 0:
                yield name
        for name, column in self._ints.items():
            if column[row] != _NO_INT:
                yield name
        if not math.isnan(self._render_s[row]):
            yield "render_s"
        if self._digest_state[row]:
            yield "digest"
        yield from self._extra.get(row, {})


class Trace(MutableMapping):
    """One trace's fields: a view of its row of a `TraceTable`."""

    __slots__ = ("_table", "_row")

    def __init__(self, table: TraceTable, row: int):
        self._table, self._row = table, row

    def __getitem__(self, name: str):
        value = self._table._get(self._row, name)
        if value is _ABSENT:
            raise KeyError(name)
        return value

    def get(self, name: str, default=None):
        value = self._table._get(self._row, name)
        return default if value is _ABSENT else value

    def __setitem__(self, name: str, value) -> None:
        self._table._set(self._row, name, value)

    def __delitem__(self, name: str) -> None:
        if not self._table._delete(self._row, name):
            raise KeyError(name)

    def __iter__(self) -> Iterator[str]:
        return self._table._names(self._row)

    def __len__(self) -> int:
        return sum(1 for _ in self._table._names(self._row))

    def __contains__(self, name) -> bool:
        return self._table._get(self._row, name) is not _ABSENT

    def __repr__(self) -> str:
        return f"Trace({dict(self)!r})"
