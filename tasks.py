"""Celery entry point from the repository root: `celery -A tasks worker --pool prefork`.

The app is farm.celery (`celery -A farm.celery worker` works anywhere the package is installed);
this file only lets the shorter name work in a checkout. It is not installed by the wheel.
"""

from farm.celery.app import app
from farm.celery.tasks import nightly_task, render_batch_task

__all__ = ["app", "nightly_task", "render_batch_task"]
