"""Which runner executes a set of batches: Celery workers when a broker is given, else a local
process pool. Jobs (farm.run.jobs) and thumbnails (farm.thumbs.run) both dispatch through here.

Both runners call `on_result(BatchResult)` once per batch, in this process, and feed `progress`
(farm.run.progress.Progress) as frames finish.
"""

from __future__ import annotations

import importlib
import socket
from collections.abc import Callable

from farm.run.execute import BatchResult
from farm.settings import broker_address, broker_url, redact_url

__all__ = ["RUNNERS", "RunnerUnavailable", "check_reachable", "in_flight", "mode", "run_batches"]

CONNECT_TIMEOUT_S = 5.0  # how long the first connection to a broker may take


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


def check_reachable(broker: str) -> None:
    """One TCP connection to the broker before anything is sent: a broker that refuses it (nothing
    listens there) or does not answer is one sentence naming the URL, not a retry loop. (A broker
    that goes away later, mid-run, is the Celery client's to wait for: FARM_BROKER_RETRY_S.)"""
    host, port = broker_address(broker)
    try:
        socket.create_connection((host, port), timeout=CONNECT_TIMEOUT_S).close()
    except OSError as e:
        why = e.strerror or str(e) or type(e).__name__
        raise RunnerUnavailable(f"cannot reach the broker {redact_url(broker)} ({host} port {port}): {why}; is Redis"
                                f" running there? (--broker local runs on this machine)") from None


def _runner(name: str) -> Callable:
    module, _, attr = RUNNERS[name].partition(":")
    return getattr(importlib.import_module(module), attr)


def run_batches(job_id: str, batches: list, store, *, broker: str | None, workers: int | None,
                on_result: Callable[[BatchResult], None], progress=None, follow: list | None = None) -> None:
    """Run `batches` for `job_id` on the runner `broker` names (see farm.settings.broker_url);
    `follow` ((task id or None, batch) pairs, from `in_flight`) are batches already sent and still
    queued or running: followed to their end, not sent again."""
    broker = broker_url(broker)
    if broker:
        check_reachable(broker)
    where = broker if broker else workers
    extra = {"follow": follow} if follow else {}
    _runner(mode(broker))(job_id, batches, store, where, on_result, progress, **extra)


# mode -> "module:function" taking (job_id, store, broker, batch_ids): which of those batches are
# still queued or running (batch id -> task id, or None); a local run's batches end with its process.
IN_FLIGHT = {"celery": "farm.celery.client:in_flight"}


def in_flight(job_id: str, store, broker: str | None, batch_ids: list[str]) -> dict[str, str | None]:
    """The batches among `batch_ids` that the runner `broker` names still has queued or running."""
    broker = broker_url(broker)
    name = IN_FLIGHT.get(mode(broker))
    if name is None or not batch_ids:
        return {}
    check_reachable(broker)
    module, _, attr = name.partition(":")
    return getattr(importlib.import_module(module), attr)(job_id, store, broker, batch_ids)
