"""Which runner executes a set of batches: Celery workers when a broker is given, else a local
process pool. Jobs (farm.run.jobs) and thumbnails (farm.thumbs.run) both dispatch through here.

Both runners call `on_result(BatchResult)` once per batch, in this process, and feed `progress`
(farm.run.progress.Progress) as frames finish.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable

from farm.run.execute import BatchResult
from farm.settings import broker_url

__all__ = ["RUNNERS", "RunnerUnavailable", "mode", "run_batches"]


class RunnerUnavailable(RuntimeError):
    """The runner cannot be reached (the broker stayed away longer than the client waits)."""

# mode -> "module:function" taking (job_id, batches, store, where, on_result, progress), `where` being
# the broker URL (celery) or the number of processes (local); imported when used: a local run never
# loads Celery or its Redis client, and the Celery client (which itself runs jobs, for the nightly
# task) is not imported by this module.
RUNNERS = {
    "celery": "farm.celery.client:run_celery",
    "local": "farm.run.local:run_local",
}


def mode(broker: str | None) -> str:
    return "celery" if broker else "local"


def _runner(name: str) -> Callable:
    module, _, attr = RUNNERS[name].partition(":")
    return getattr(importlib.import_module(module), attr)


def run_batches(job_id: str, batches: list, store, *, broker: str | None, workers: int | None,
                on_result: Callable[[BatchResult], None], progress=None) -> None:
    """Run `batches` for `job_id` on the runner `broker` names (see farm.settings.broker_url)."""
    broker = broker_url(broker)
    where = broker if broker else workers
    _runner(mode(broker))(job_id, batches, store, where, on_result, progress)
