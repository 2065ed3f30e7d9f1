"""Jobs cut into batches: the unit of work every runner (local pool, Celery) executes.

A job expands into traces: one per (model, sequence, timestamp) under the model's render settings
(farm.settings.RenderSettings), each named by its trace key (farm.plan.keys). A *batch* is one
model and one sequence with many timestamps, sorted ascending, so a worker loads the model (and
simulates its effects) once per batch and walks time forward. Running a batch is farm.run.execute.

`Batch.to_dict()` is what travels in job files and Celery messages: a flat JSON object whose keys
have not changed since the first job format, so jobs written by earlier versions still load.

Nothing here imports GL; planning reads each model once (no GL) for its sequences and lengths.

What a retry cannot fix is found here, before anything renders: a model that does not load is
`Plan.unloadable` (its traces carry the cause `farm.plan.causes.UNLOADABLE` and the sentence
"<model> does not load: <the loader's sentence>"; `farm run` sends none of its batches and
`farm retry` leaves it until the model loads), and a sequence named in a manifest that a model
does not have is a ManifestError naming the line of that `sequences` entry (`expand_manifest`).
"""

from __future__ import annotations

import fnmatch
import hashlib
import json
from collections.abc import Iterable
from dataclasses import dataclass, field

from farm.environment import default_int, env_int
from farm.files import file_digest
from farm.plan.causes import UNLOADABLE
from farm.plan.keys import percent_text, trace_key_for
from farm.plan.manifest import Manifest, ManifestError, ModelPlan, TraceThresholds, resolve_fallback
from farm.plan.traces import TraceTable
from farm.settings import RenderSettings
from renderer.anim import find_sequence as _find_sequence
from renderer.assets import read_source, split_source
from renderer.context import Loaded
from renderer.errors import error_text
from renderer.formats import load

DEFAULT_MAX_FRAMES = default_int("FARM_MAX_FRAMES")
DEFAULT_BATCH_FRAMES = default_int("FARM_BATCH_FRAMES")

__all__ = ["DEFAULT_MAX_FRAMES", "PLAN_BYTES_PER_FRAME", "Batch", "Plan", "TooManyFrames", "available_memory",
           "expand_manifest", "expand_plan", "find_sequence", "frame_limit", "max_frames", "model_digest",
           "read_model", "read_model_and_digest", "resolve_stamps", "resolve_times", "sequence_label"]


class TooManyFrames(ValueError):
    """A plan that would render more frames than the job may (`frame_limit`: memory, FARM_MAX_FRAMES)."""


def batch_frames(environ=None) -> int:
    """The most frames in one batch (FARM_BATCH_FRAMES, default 48): a long sequence is cut into
    batches of consecutive timestamps, so its frames spread over every worker instead of making one
    process the whole job's critical path. Frames are the same bytes either way (a batch renders what
    separate renders give); each batch loads the model once and simulates its effects from the
    bounded window before its first frame."""
    return env_int("FARM_BATCH_FRAMES", environ=environ)


def chunks(times: list, size: int) -> list[list]:
    """`times` (ascending) in runs of at most `size`, as even as possible: 100 by 48 is 34, 33, 33."""
    n = max(1, -(-len(times) // size))
    base, extra = divmod(len(times), n)
    out, i = [], 0
    for k in range(n):
        step = base + (1 if k < extra else 0)
        out.append(times[i:i + step])
        i += step
    return [c for c in out if c] or [times]


def max_frames(environ=None) -> int:
    """The most frames one job may plan by count (FARM_MAX_FRAMES; 0, the default: no count, only
    the memory check of `frame_limit`)."""
    return env_int("FARM_MAX_FRAMES", environ=environ)


# What the coordinator holds per planned frame at its peak (the plan, the job state in columns, writing
# the job document in pieces, the run), measured by bench/scale.py --job-only at 1M frames (509 MB,
# bench/README.md) with a margin: the memory check's unit.
PLAN_BYTES_PER_FRAME = 800


def _meminfo_available(path: str = "/proc/meminfo") -> int | None:
    try:
        with open(path, encoding="ascii") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


def _cgroup_available(root: str = "/sys/fs/cgroup") -> int | None:
    """What this process's cgroup (v2) may still use: memory.max - memory.current; None without a limit."""
    try:
        with open(f"{root}/memory.max", encoding="ascii") as f:
            limit = f.read().strip()
        with open(f"{root}/memory.current", encoding="ascii") as f:
            current = int(f.read().strip())
    except (OSError, ValueError):
        return None
    return None if limit == "max" else max(0, int(limit) - current)


def available_memory() -> tuple[int | None, str]:
    """(bytes this process may still use, where that figure comes from): the smaller of the system's
    MemAvailable and the cgroup's room; (None, ...) when neither can be read."""
    found = [(v, what) for v, what in ((_meminfo_available(), "MemAvailable in /proc/meminfo"),
                                       (_cgroup_available(), "the cgroup's memory.max")) if v is not None]
    return min(found) if found else (None, "unknown")


def frame_limit(environ=None) -> tuple[int, str]:
    """(the most frames one job may plan here, why): what the coordinator's available memory holds at
    `PLAN_BYTES_PER_FRAME` a frame, and FARM_MAX_FRAMES when that is set and smaller. The sentence
    ends a "more than ..." error."""
    cap = max_frames(environ)
    room, where = available_memory()
    by_memory = room // PLAN_BYTES_PER_FRAME if room is not None else None
    if cap and (by_memory is None or cap <= by_memory):
        return cap, f"the cap of {cap:,} per job (FARM_MAX_FRAMES)"
    if by_memory is None:
        return 1 << 62, "no limit"
    return by_memory, (f"the {by_memory:,} frames this coordinator's memory holds ({room >> 20:,} MB available, by"
                       f" {where}; about {PLAN_BYTES_PER_FRAME:,} bytes a planned frame): split the job, or run it"
                       f" where there is more memory")


def resolve_stamps(plan: ModelPlan, length_ms: int, limit: int | None = None,
                   sequence: bool = True) -> list[tuple[int, int | str]]:
    """The plan's timestamps for a sequence `length_ms` long, as (ms, what the trace key names): ms as
    given (``(500, 500)``), fractions of the length rounded to the nearest ms (``(1000, "50%")``: the
    key names the fraction, so it does not change with the length), or every N ms from 0 to the
    length; sorted by ms. Two stamps at the same ms (``0`` and ``"0%"``) are two traces.

    Without a sequence (`sequence` False: the bind pose, or a model or sequence not found when
    planning) there is nothing to take a fraction of: every fraction is 0 ms, keyed in ms, one trace
    per ms (as keys always were for them), so a model without animations renders once, not once per
    fraction.

    The count is known before the list is built: more than `limit` (default `frame_limit()`) is a
    TooManyFrames error, never a list that fills the memory."""
    length = max(int(length_ms), 0)
    limit, why = frame_limit() if limit is None else (limit, f"the cap of {limit:,} per job")
    if plan.every is not None:
        count = length // plan.every + 1
        if count > limit:
            raise TooManyFrames(f"{plan.rel}: every = {plan.every} over a sequence of {length} ms is {count:,} frames,"
                                f" more than {why}")
        return [(t, t) for t in range(0, length + 1, plan.every)]
    out: dict[int | str, int] = {}
    for t in plan.timestamps or (0,):
        if isinstance(t, str) and t.endswith("%"):
            ms = int(round(float(t[:-1]) / 100.0 * length))
            out[percent_text(t) if sequence else ms] = ms
        else:
            out[int(t)] = int(t)
    return sorted(((ms, label) for label, ms in out.items()),
                  key=lambda s: (s[0], isinstance(s[1], str), float(str(s[1]).rstrip("%"))))


def resolve_times(plan: ModelPlan, length_ms: int, limit: int | None = None) -> list[int]:
    """The ms of `resolve_stamps`, without repeats."""
    return sorted({ms for ms, _ in resolve_stamps(plan, length_ms, limit)})


@dataclass
class Batch:
    """One model, one sequence, timestamps ascending; everything a worker needs, JSON-friendly."""

    model: str  # absolute path
    model_rel: str
    model_digest: str | None  # sha256 of the file when the job was planned (None: it did not load)
    sequence: int | str | None  # index (planned), name (to resolve when rendering), None (bind pose)
    sequence_name: str | None  # as it appears in the trace keys
    times: list[int]
    keys: list[str]
    settings: RenderSettings = field(default_factory=RenderSettings)
    provisional: bool = False  # planned without reading the model: `farm retry` plans it again
    stop_at: str | None = None  # the job or asset root holding the model: its texture search climbs no higher
    missing: str = "warn"  # a frame rendered with a missing asset: "warn" (done, noted) or "fail"
    id: str = ""
    kind: str = "frames"  # what `render_batch` does with it: "frames", or a name in BATCH_KINDS
    params: dict = field(default_factory=dict)  # what a batch of another kind needs beyond the fields above
    inputs: str | None = None  # sha256 of its travelling inputs' pinned answers in the store (farm.run.inputs)

    def __post_init__(self):
        order = sorted(range(len(self.times)), key=lambda i: self.times[i])
        self.times = [int(self.times[i]) for i in order]
        self.keys = [self.keys[i] for i in order]
        if not self.id:
            self.id = self.compute_id()

    def compute_id(self) -> str:
        body = [self.model_rel, self.model_digest, self.sequence, self.keys]
        if self.kind != "frames":
            body += [self.kind, self.params]
        body = json.dumps(body, sort_keys=True)
        return hashlib.sha256(body.encode()).hexdigest()[:20]

    def subset(self, keys: Iterable[str]) -> Batch:
        """The same batch restricted to some of its traces (for retries); a new id."""
        keep = set(keys)
        idx = [i for i, k in enumerate(self.keys) if k in keep]
        d = self.to_dict()
        d.update(times=[self.times[i] for i in idx], keys=[self.keys[i] for i in idx], id="")
        return Batch.from_dict(d)

    def to_dict(self) -> dict:
        return {
            "id": self.id, "model": self.model, "model_rel": self.model_rel, "model_digest": self.model_digest,
            "sequence": self.sequence, "sequence_name": self.sequence_name, "times": list(self.times),
            "keys": list(self.keys), **self.settings.to_dict(), "provisional": self.provisional,
            **({"stop_at": self.stop_at} if self.stop_at else {}),
            **({"missing": self.missing} if self.missing != "warn" else {}),
            **({"kind": self.kind, "params": dict(self.params)} if self.kind != "frames" else {}),
            **({"inputs": self.inputs} if self.inputs else {}),
        }

    @classmethod
    def from_dict(cls, d: dict, made: dict | None = None) -> Batch:
        """A batch from `to_dict`'s flat form (job files and Celery messages of every version); `made`:
        settings already made for batches read with it (RenderSettings.split)."""
        settings, rest = RenderSettings.split(d, made)
        return cls(**rest, settings=settings)

    def frame_spec(self, sequence: int | None, time_ms: int):
        return self.settings.frame_spec(sequence, time_ms, self.stop_at)


@dataclass
class Plan:
    """A job, expanded: its batches and, per trace key, what the golden step needs to know."""

    batches: list[Batch]
    # key -> {model, sequence, time_ms, batch, thresholds[, cause, error]}: one model's as a dict
    # (expand_plan), a job's as a TraceTable (expand_manifest: a million traces in columns)
    traces: dict | TraceTable
    models: dict[str, dict] = field(default_factory=dict)  # model rel -> ModelPlan.to_dict()
    unloadable: dict[str, str] = field(default_factory=dict)  # model rel -> "<rel> does not load: <sentence>"
    # model rel -> [(the sequence asked for, the names the model has)]: a manifest error (expand_manifest)
    unknown: dict[str, list] = field(default_factory=dict)

    def merge(self, other: Plan) -> None:
        self.batches.extend(other.batches)
        self.traces.update(other.traces)
        self.models.update(other.models)
        self.unloadable.update(other.unloadable)
        self.unknown.update(other.unknown)

    def runnable(self) -> list[Batch]:
        """The batches worth sending: not those of a model that does not load (they fail as planned)."""
        return [b for b in self.batches if b.model_rel not in self.unloadable]


def sequence_label(model, index: int) -> str:
    """How sequence `index` appears in trace keys: its name, or name#index when names repeat."""
    names = [str(s.name) for s in model.sequences]
    name = names[index]
    return name if names.count(name) == 1 else f"{name}#{index}"


def find_sequence(model, key) -> int:
    """The index of sequence `key` (name or index) in `model` (renderer.anim's rules); ValueError
    (renderer.anim.UnknownSequence) listing the sequences it has when there is none."""
    return _find_sequence(model, key)


def expand_plan(plan: ModelPlan, trace_thresholds: list[TraceThresholds] = (), loader=None,
                planned=None) -> Plan:
    """Batches and traces of one model, read here (no GL; by `loader`, source -> Loaded, default
    `read_model`) for its sequences and their lengths; `planned(batches, loaded)`, if given, gets the
    batches with that read (travelling inputs: farm.run.inputs.Publisher). When it cannot be read,
    the batches are provisional and the model is in `unloadable`: its traces are failed as planned
    (cause UNLOADABLE, the loader's sentence), nothing renders them, and `farm retry` plans it again
    once it loads. A sequence the model lacks is in `unknown` (a manifest error for `expand_manifest`);
    its batch is provisional (a retry of a job planned before: its frames fail, listing the model's)."""
    load, batches = loader or read_model, []
    rs = plan.settings
    common = dict(settings=rs, stop_at=plan.root, missing=plan.missing)

    def batch(digest, sequence, name, stamps, provisional=False):
        keys = [trace_key_for(plan.rel, name, label, rs) for _, label in stamps]
        return Batch(plan.path, plan.rel, digest, sequence, name, [ms for ms, _ in stamps], keys,
                     provisional=provisional, **common)

    def provisional_stamps():  # no sequence to take fractions of (resolve_stamps)
        return resolve_stamps(plan, 0, sequence=False) if plan.every is None else [(0, 0)]

    unloadable: dict[str, str] = {}
    unknown: list = []
    chain = plan.sequence_fallback  # ["Portrait", "Stand", "first"]: one sequence, picked from the model
    try:
        loaded, digest = read_model_and_digest(plan.path, load)
        model = loaded.model
    except Exception as e:  # noqa: BLE001 - any loader failure: the model's frames fail with its sentence
        unloadable[plan.rel] = f"{plan.rel} does not load: {error_text(e)}"
        selectors = resolve_fallback(None, chain) if chain else [None] if plan.sequences == "all" \
            else list(plan.sequences)
        for sel in selectors:
            batches.append(batch(None, sel, None if sel is None else str(sel), provisional_stamps(), True))
    else:
        n = len(model.sequences)
        if chain:
            selected: list = resolve_fallback(model, chain)
        elif plan.sequences == "all":
            selected = list(range(n)) or [None]
        else:
            selected = list(plan.sequences)
        seen = set()
        for sel in selected:
            if sel is None:
                batches.append(batch(digest, None, None, resolve_stamps(plan, 0, sequence=False)))
                continue
            try:
                index = sel if plan.sequences == "all" else find_sequence(model, sel)
            except ValueError as e:  # not in this model: a manifest error (or, on a retry, failed frames)
                unknown.append((sel, list(getattr(e, "available", None) or [s.name for s in model.sequences])))
                batches.append(batch(digest, str(sel), str(sel), provisional_stamps(), True))
                continue
            if index in seen:
                continue
            seen.add(index)
            start, end = model.sequences[index].interval
            stamps = resolve_stamps(plan, int(end) - int(start))
            label = sequence_label(model, index)
            for part in chunks(stamps, batch_frames()):
                batches.append(batch(digest, index, label, part))
    if planned is not None and plan.rel not in unloadable:
        planned(batches, loaded)
    traces: dict[str, dict] = {}
    # One thresholds object per set of matching [[thresholds.traces]] entries, shared by the traces it
    # applies to (never changed in place): a million planned frames hold a handful, not a million.
    shared: dict[tuple[int, ...], dict] = {}
    for b in batches:
        for t, k in zip(b.times, b.keys, strict=True):
            matched = tuple(i for i, tt in enumerate(trace_thresholds) if fnmatch.fnmatchcase(k, tt.match))
            thresholds = shared.get(matched)
            if thresholds is None:
                thresholds = shared[matched] = dict(plan.thresholds)
                for i in matched:
                    thresholds.update(trace_thresholds[i].values)
            trace = {"model": plan.rel, "sequence": b.sequence_name, "time_ms": t, "batch": b.id,
                     "thresholds": thresholds}
            if plan.rel in unloadable:
                trace.update(cause=UNLOADABLE, error=unloadable[plan.rel])
            traces[k] = trace
    return Plan(batches, traces, {plan.rel: plan.to_dict()}, unloadable, {plan.rel: unknown} if unknown else {})


def model_digest(source: str) -> str:
    """sha256 of a model's bytes: a file, or an archive entry (`maps/x.w3x:war3mapImported/y.mdx`)."""
    if split_source(source) is not None:
        return hashlib.sha256(read_source(source)).hexdigest()
    return file_digest(source)


def read_model_and_digest(source: str, loader=None) -> tuple[Loaded, str]:
    """(the model and its context, the sha256 of its bytes). The file or archive entry is read once:
    its loader records the digest of the bytes it decoded in the context's location; only a loader
    that does not (a stand-in) has the source read again for it."""
    loaded = (loader or read_model)(source)
    return loaded, loaded.context.location.digest or model_digest(source)


def read_model(path: str) -> Loaded:
    """A model as the farm reads it, with its context (no GL; diagnostics, not errors, for oddities)."""
    return load(path, strict=False)


def expand_manifest(manifest: Manifest, loader=None, planned=None) -> Plan:
    """Every model of the manifest, expanded (`loader`, `planned`: as for `expand_plan`). A sequence
    named in the manifest that a model does not have, and a `[[thresholds.traces]]` glob that matches
    no trace, are ManifestErrors naming the line."""
    plan = Plan([], TraceTable(), {})
    cap, why = frame_limit()  # once, before planning takes the memory it measures
    for mp in manifest.plans:
        try:
            plan.merge(expand_plan(mp, manifest.trace_thresholds, loader, planned))
        except TooManyFrames as e:
            raise ManifestError(manifest.shown_as or manifest.path, mp.line, str(e)) from None
        if len(plan.traces) > cap:
            raise ManifestError(manifest.shown_as or manifest.path, mp.line,
                                f"the job plans {len(plan.traces):,} frames by {mp.rel}, more than {why}"
                                + ("" if "split" in why else ": render fewer timestamps or split the job"))
    if plan.unknown:
        raise manifest.unknown_sequences(manifest.plans, plan.unknown)
    for tt in manifest.trace_thresholds:
        if not any(fnmatch.fnmatchcase(k, tt.match) for k in plan.traces):
            example = next(iter(plan.traces), "?")
            raise ManifestError(manifest.shown_as or manifest.path, tt.line,
                                f"[[thresholds.traces]] match {tt.match!r} matches no trace of this job (keys look"
                                f" like {example!r})")
    return plan
