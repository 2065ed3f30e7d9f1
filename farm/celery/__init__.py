"""Celery for the farm: `celery -A farm.celery worker` (or `beat`) finds `app` here.

app (the app, its configuration, the beat schedule, the worker signals) and tasks (the render and
nightly tasks, which a worker imports as it starts: the app's `include`). The runner that sends a
job's batches and follows them is farm.run.celery, beside the local one. Importing this package
loads neither the tasks nor GL (each pool process creates its own context in ``worker_process_init``).
"""

from farm.celery.app import app

__all__ = ["app"]
