"""Which runner executes a set of batches: Celery workers when a broker is given, else a local
process pool. Jobs (farm.run.jobs) and thumbnails (farm.thumbs.run) both dispatch through here.

Both runners call `on_result(BatchResult)` once per batch, in this process, and feed `progress`
(farm.run.progress.Progress) as frames finish. With `group`, small batches travel in envelopes
(farm.plan.envelopes), each batch's result still its own.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable

from farm.environment import check_reachable
from farm.run.errors import RunnerUnavailable
from farm.run.execute import BatchResult

__all__ = ["RUNNERS", "RunnerUnavailable", "in_flight", "mode", "run_batches"]

# mode -> "module:function" taking (job_id, batches, store, where, on_result, progress), `where` being
# the broker URL (celery) or the number of processes (local); imported when used: a local run never
# loads Celery or its Redis client. These strings are edges of the import graph all the same
# (tests/test_import_graph.py follows them).
RUNNERS = {
    "celery": "farm.run.celery:run_celery",
    "local": "farm.run.local:run_local",
}


def mode(broker: str | None) -> str:
    return "celery" if broker else "local"


def _runner(name: str) -> Callable:
    module, _, attr = RUNNERS[name].partition(":")
    return getattr(importlib.import_module(module), attr)


def _reach(broker: str | None) -> None:
    """A broker about to be used is connected to once (farm.environment.check_reachable)."""
    if broker:
        check_reachable(broker)


def run_batches(job_id: str, batches: list, store, *, broker: str | None, workers: int | None,
                on_result: Callable[[BatchResult], None], progress=None, follow: list | None = None,
                group: bool = False) -> None:
    """Run `batches` for `job_id` on the runner `broker` names: the URL the caller resolved with
    farm.environment.broker_url, None to run locally (never resolved again here: ``--broker local``
    resolves to None, which must not turn into FARM_BROKER_URL); `follow` ((task id or None, batch)
    pairs, from `in_flight`) are batches already sent and still queued or running: followed to their
    end, not sent again; `group`: many small batches to a delivery (farm.plan.envelopes: one local
    submission, one Celery task, at most FARM_BATCH_FRAMES frames), each batch's result still its own."""
    _reach(broker)
    where = broker if broker else workers
    extra = {**({"follow": follow} if follow else {}), **({"group": True} if group else {})}
    _runner(mode(broker))(job_id, batches, store, where, on_result, progress, **extra)


# mode -> "module:function" taking (job_id, store, broker, batch_ids): which of those batches are
# still queued or running (batch id -> task id, or None); a local run's batches end with its process.
IN_FLIGHT = {"celery": "farm.run.celery:in_flight"}


def in_flight(job_id: str, store, broker: str | None, batch_ids: list[str]) -> dict[str, str | None]:
    """The batches among `batch_ids` that the runner `broker` (resolved, as for `run_batches`) still
    has queued or running."""
    _reach(broker)
    name = IN_FLIGHT.get(mode(broker))
    if name is None or not batch_ids:
        return {}
    module, _, attr = name.partition(":")
    return getattr(importlib.import_module(module), attr)(job_id, store, broker, batch_ids)
