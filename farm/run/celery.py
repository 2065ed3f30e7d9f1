"""The client side of a Celery run: send a job's batches, follow their progress, collect results.

Used by farm.run.dispatch when a broker is given (`farm run --broker`, `farm thumbnails
--broker`, the nightly task), beside the local runner (farm.run.local). It sends batches by task name
(farm.celery.app.RENDER_TASK; with `group`, envelopes of many small batches: ENVELOPE_TASK) through
the worker's app and never imports the tasks (farm.celery.tasks), which run the nightly, which runs
jobs, which dispatch here.

Batches the broker lost. A Redis that restarts without its data (no AOF) forgets the batches still
queued (and their states). After a reconnect, or when Redis's run id changes, the client compares
what it sent with what the broker holds (queued, or delivered and not acknowledged: `broker_tasks`)
and what the store says (finished, or begun and not ended): a batch in none of them on two checks in
a row is sent again; one begun and not ended gets the hard time limit (plus a minute) to finish
first. A redelivered batch skips the frames already recorded as done (farm.run.execute), so no frame
is rendered twice and none is lost. `in_flight` tells `farm retry --pending` which batches are still
queued or running, so it follows them instead of sending them twice.
"""

from __future__ import annotations

import base64
import json
import logging
import time
from collections.abc import Callable

import redis.exceptions
from celery import states
from celery.result import AsyncResult
from kombu.exceptions import OperationalError

from farm.celery.app import ENVELOPE_TASK, RENDER_TASK, app
from farm.environment import env_given, env_int, redact_url
from farm.plan.envelopes import PER_PROCESS, Envelope, envelopes
from farm.run.errors import RunnerUnavailable
from farm.run.execute import BatchResult, record_forward

__all__ = ["broker_tasks", "in_flight", "run_celery"]

log = logging.getLogger("farm.celery")
# What a broker or result backend that went away raises, through kombu or redis-py.
CONNECTION_ERRORS = (redis.exceptions.ConnectionError, redis.exceptions.TimeoutError, OperationalError,
                     ConnectionError, TimeoutError)
STORE_CHECK_S = 5.0  # how often batch results are also looked for in the store
LOST_GRACE_S = 60  # beyond the hard time limit, how long a begun batch the broker lost may take


class _Reconnecting:
    """Calls that survive a broker restart: retried every second or two for up to `budget_s`
    seconds, with one line when the connection is lost and one when it is back."""

    def __init__(self, broker: str | None, say: Callable[[str], None], budget_s: int):
        self.broker = redact_url(broker or app.conf.broker_url or "")
        self.say = say
        self.budget_s = budget_s
        self.lost_at: float | None = None  # when the current outage began (None: connected)
        self.reconnected = False  # an outage ended since the caller last looked (it clears this)

    def __call__(self, fn, *args, **kwargs):
        attempt = 0
        while True:
            try:
                result = fn(*args, **kwargs)
            except CONNECTION_ERRORS as e:
                now = time.monotonic()
                if self.lost_at is None:
                    self.lost_at = now
                    self.say(f"lost the connection to the broker {self.broker} ({type(e).__name__}: {e});"
                             f" reconnecting for up to {self.budget_s} s")
                if now - self.lost_at > self.budget_s:
                    raise RunnerUnavailable(f"the broker {self.broker} did not answer for {self.budget_s} s"
                                            f" (FARM_BROKER_RETRY_S); the batches sent are still queued there:"
                                            f" `farm retry JOB --pending` follows them again") from None
                attempt += 1
                time.sleep(min(2.0, 0.25 * 2 ** attempt))  # 0.5, 1, 2, 2, ... s
                continue
            if self.lost_at is not None:
                self.say(f"reconnected to the broker after {time.monotonic() - self.lost_at:.1f} s")
                self.lost_at = None
                self.reconnected = True
            return result


def _message_task(raw) -> tuple[str, dict]:
    """(task id, keyword arguments) of a message as kombu's Redis transport stores it."""
    try:
        msg = json.loads(raw)
        if isinstance(msg, list):  # the unacked hash: [message, exchange, routing key]
            msg = msg[0]
        task_id = str(msg.get("headers", {}).get("id", ""))
        body = msg.get("body", "")
        if msg.get("properties", {}).get("body_encoding") == "base64":
            body = base64.b64decode(body)
        kwargs = json.loads(body)[1]
        return task_id, kwargs if isinstance(kwargs, dict) else {}
    except (ValueError, TypeError, KeyError, IndexError, AttributeError):
        return "", {}


def _queue() -> str:
    """The queue batches are sent to: FARM_QUEUE as this process has it now, else the app's."""
    return env_given("FARM_QUEUE") or app.conf.task_default_queue


def broker_tasks(queue: str, conn=None) -> dict[str, dict]:
    """Task id -> keyword arguments of every batch the (Redis) broker holds for `queue`: queued, or
    delivered to a worker and not acknowledged yet (running, or waiting for a retry's countdown)."""
    own = conn is None
    conn = conn or app.connection_for_read()
    try:
        channel = conn.default_channel
        client = channel.client
        raws = [m for pri in channel.priority_steps for m in client.lrange(channel._q_for_pri(queue, pri), 0, -1)]
        raws.extend(client.hvals(channel.unacked_key))
    finally:
        if own:
            conn.release()
    return dict(_message_task(raw) for raw in raws)


def _message_batches(kwargs: dict) -> list[dict]:
    """The batches (their wire form) a render task's keyword arguments carry: one, or an envelope's."""
    if isinstance(kwargs.get("batch"), dict):
        return [kwargs["batch"]]
    envelope = kwargs.get("envelope") if isinstance(kwargs.get("envelope"), dict) else {}
    return [b for b in envelope.get("batches") or () if isinstance(b, dict)]


def _members(item) -> list:
    """The batches of what one task carries: an envelope's, or the one batch."""
    return item.batches if isinstance(item, Envelope) else [item]


def _broker_run_id(conn) -> str | None:
    return conn.default_channel.client.info("server").get("run_id")


def in_flight(job_id: str, store, broker: str | None, batch_ids: list[str]) -> dict[str, str | None]:
    """Batch id -> task id of the batches of `job_id` (among `batch_ids`) still queued or running:
    held by the broker, or begun by a worker and not ended (task id None when the broker lost it)."""
    if broker:
        app.conf.broker_url = broker
    wanted = set(batch_ids)
    queue = _queue()
    found: dict[str, str | None] = {}
    try:
        for task_id, kwargs in broker_tasks(queue).items():
            for batch in _message_batches(kwargs):
                if kwargs.get("job_id") == job_id and batch.get("id") in wanted:
                    found[batch["id"]] = task_id
    except CONNECTION_ERRORS as e:
        raise RunnerUnavailable(f"the broker {redact_url(app.conf.broker_url)} did not answer ({e}); cannot tell"
                                f" which pending batches are still queued") from None
    for batch_id in wanted - set(found):
        if store.unfinished(job_id, batch_id):
            found[batch_id] = None
    return found


class _LostBatches:
    """Which sent batches the broker lost (see the module docstring), checked every STORE_CHECK_S
    while `watching`: after a reconnect, a new Redis run id, or from the start when following."""

    def __init__(self, store, job_id: str, queue: str, watching: bool):
        self.store, self.job_id, self.queue = store, job_id, queue
        self.grace_s = float(app.conf.task_time_limit or 0) + LOST_GRACE_S
        self.watching = watching
        self.missing: dict[str, float] = {}  # task id -> when first seen missing
        self.run_id: str | None = None
        self.conn = app.connection_for_read()

    def close(self) -> None:
        self.conn.release()

    def check(self, call, pending: dict, metas: dict, reconnected: bool) -> list[str]:
        """The task ids (of `pending`) that the broker lost (none known on a broker other than Redis)."""
        if not call(lambda: hasattr(self.conn.default_channel, "client")):
            return []
        run_id = call(_broker_run_id, self.conn)
        if reconnected or (self.run_id is not None and run_id != self.run_id):
            self.watching = True
        self.run_id = run_id
        if not self.watching:
            return []
        held = call(broker_tasks, self.queue, self.conn)
        now, lost, missing = time.monotonic(), [], {}
        for task_id, item in pending.items():
            if task_id in held or metas.get(task_id, {}).get("status") in states.READY_STATES:
                continue
            since = missing[task_id] = self.missing.get(task_id, now)
            begun = any(self.store.unfinished(self.job_id, b.id) for b in _members(item))
            if since < now and (not begun or now - since > self.grace_s):
                lost.append(task_id)
                del missing[task_id]
        self.missing = missing
        self.watching = bool(missing)
        return lost


def _states(task_ids: list[str], chunk: int = 500) -> dict[str, dict]:
    """Each task's result meta ({status, result}); one MGET per `chunk` tasks on a Redis backend."""
    backend = app.backend
    out: dict[str, dict] = {}
    if hasattr(backend, "mget") and hasattr(backend, "get_key_for_task"):
        for i in range(0, len(task_ids), chunk):
            ids = task_ids[i:i + chunk]
            for task_id, raw in zip(ids, backend.mget([backend.get_key_for_task(t) for t in ids]), strict=True):
                out[task_id] = backend.decode_result(raw) if raw else {"status": "PENDING", "result": None}
        return out
    for task_id in task_ids:
        r = AsyncResult(task_id, app=app)
        out[task_id] = {"status": r.state, "result": r.result}
    return out


def _failed(store, job_id: str, batch, error: str) -> BatchResult:
    """A batch the task failed as a whole (the hard time limit, retries exhausted): its frames that
    were not recorded as done fail with `error`; those that were stay done (the store merges forward)."""
    result = BatchResult.all_failed(batch, error)
    try:
        return record_forward(store, job_id, result)
    except OSError as e:
        log.warning("batch %s: its failure was not written to the store: %s", batch.id, e)
        return result


def run_celery(job_id: str, batches: list, store, broker: str | None, on_result: Callable, progress=None,
               poll_s: float = 0.2, timeout_s: float | None = None, follow: list | None = None,
               group: bool = False) -> None:
    """Send every batch to the workers and wait for all results, feeding `progress` as they run.

    `follow` ((task id or None, batch) pairs) are batches already sent and still in flight (`in_flight`):
    followed, not sent again. `group`: the batches go in envelopes (farm.plan.envelopes), one
    `farm.render_envelope` task each; each batch's result is still passed on once, by itself. A
    batch that fails as a task (retries exhausted, the hard time limit) fails its frames that were not
    recorded as done with the task's error. A batch whose worker died is redelivered by the broker
    and simply takes longer; one the broker lost is sent again.
    """
    if broker:
        app.conf.broker_url = broker
        if not env_given("FARM_RESULT_BACKEND"):
            app.conf.result_backend = broker
    queue = _queue()

    def say(text: str) -> None:
        log.warning("%s", text)
        if progress is not None and hasattr(progress, "write"):
            progress.write(f"farm: {text}")

    call = _Reconnecting(broker, say, env_int("FARM_BROKER_RETRY_S"))

    def send(item) -> str:
        if isinstance(item, Envelope):
            task, kwargs = ENVELOPE_TASK, {"job_id": job_id, "envelope": item.to_dict(), "out": store.location}
        else:
            task, kwargs = RENDER_TASK, {"job_id": job_id, "batch": item.to_dict(), "out": store.location}
        return call(app.send_task, task, kwargs=kwargs, queue=queue, retry=False).id

    pending = {task_id or f"followed-{b.id}": b for task_id, b in (follow or ())}
    # the workers' processes are not known here: a small set is spread as for a pool of 2
    for item in envelopes(batches, least=2 * PER_PROCESS) if group else batches:
        pending[send(item)] = item
    lost = _LostBatches(store, job_id, queue, watching=bool(follow))
    try:
        _follow(job_id, store, pending, _Once(on_result), progress, call, lost, send, say, poll_s, timeout_s)
    except BaseException:
        log.warning("stopped waiting; %d batch(es) are still queued or running on the workers", len(pending))
        raise
    finally:
        lost.close()


class _Once:
    """`on_result` called once per batch: an envelope's batches may come from the store first, then
    with the envelope's result."""

    def __init__(self, on_result: Callable):
        self.on_result, self.seen = on_result, set()

    def __call__(self, result: BatchResult) -> None:
        if result.batch not in self.seen:
            self.seen.add(result.batch)
            self.on_result(result)

    def left(self, item) -> list:
        """The batches of `item` (an envelope, a batch) whose result has not been passed on."""
        return [b for b in _members(item) if b.id not in self.seen]


def _follow(job_id, store, pending, on_result, progress, call, lost, send, say, poll_s, timeout_s) -> None:
    deadline = None if timeout_s is None else time.monotonic() + timeout_s
    checked = time.monotonic()
    while pending:
        metas = call(_states, list(pending))
        if time.monotonic() - checked > STORE_CHECK_S or call.reconnected:
            reconnected, call.reconnected = call.reconnected, False
            checked = time.monotonic()
            _from_store(job_id, store, pending, metas, on_result)
            gone = lost.check(call, pending, metas, reconnected)
            if gone:
                say(f"the broker lost {len(gone)} batch(es) it held (Redis restarted without its data?);"
                    f" sending them again")
                for task_id in gone:
                    b = pending.pop(task_id)
                    metas.pop(task_id, None)
                    pending[send(b)] = b
        for task_id, meta in metas.items():
            if task_id in pending:
                _take(job_id, store, task_id, meta, pending, on_result, progress, call)
        if pending:
            if deadline is not None and time.monotonic() > deadline:
                raise TimeoutError(f"{len(pending)} batch(es) not finished after {timeout_s} s")
            time.sleep(poll_s)


def _from_store(job_id, store, pending, metas, on_result: _Once) -> None:
    """A batch whose result the backend lost (Redis restarted after the worker stored it, or
    before) still has its result in the store, written by the worker that ran it; so does each batch
    of an envelope (BatchKind.keep_result), read once its last batch is there (an envelope still
    running is left to its task: its result, or its failure, which keeps what it finished)."""
    for task_id, item in list(pending.items()):
        if metas.get(task_id, {}).get("status") in states.READY_STATES:
            continue
        last = _members(item)[-1]
        if isinstance(item, Envelope) and not _complete(store.read_batch_result(job_id, last.id), last):
            continue
        for b in on_result.left(item):
            found = store.read_batch_result(job_id, b.id)
            if _complete(found, b):
                on_result(BatchResult.from_dict(found))
        if not on_result.left(item):
            del pending[task_id]
            metas.pop(task_id, None)


def _complete(found: dict | None, batch) -> bool:
    """Whether a stored result holds every frame of `batch`."""
    return bool(found) and len(found.get("frames", ())) == len(batch.keys)


def _take(job_id, store, task_id, meta, pending, on_result: _Once, progress, call) -> None:
    """One task's state: progress, its result (an envelope's: each batch's), or its failure."""
    item = pending[task_id]
    state = meta.get("status")
    if state == "PROGRESS" and progress is not None:
        info = meta.get("result") or {}
        if isinstance(info, dict) and item.id in (info.get("batch"), info.get("envelope")):
            progress.update(item.id, info.get("done", 0), info.get("failed", 0))
    elif state == "SUCCESS":
        del pending[task_id]
        result = meta["result"]
        if isinstance(item, Envelope) and progress is not None:
            progress.finish(item.id, 0, 0)  # the envelope's frames are counted again batch by batch
        for r in result["results"] if isinstance(item, Envelope) else [result]:
            on_result(BatchResult.from_dict(r))
        call(app.backend.forget, task_id)
    elif state in ("FAILURE", "REVOKED"):
        del pending[task_id]
        if isinstance(item, Envelope) and progress is not None:
            progress.finish(item.id, 0, 0)
        exc = meta.get("result")
        for b in on_result.left(item):
            on_result(_failed(store, job_id, b, f"the batch task failed: {type(exc).__name__}: {exc}"))
        call(app.backend.forget, task_id)
