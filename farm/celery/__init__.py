"""Celery for the farm: `celery -A farm.celery worker` (or `beat`) finds `app` here.

app (the app, its configuration, the beat schedule, the worker signals), tasks (the render and
nightly tasks), client (send a job's batches and follow them). Importing this package registers
the tasks; it loads no GL (each pool process creates its own context in ``worker_process_init``).
"""

from farm.celery.app import app
from farm.celery.tasks import nightly_task, render_batch_task

__all__ = ["app", "nightly_task", "render_batch_task"]
