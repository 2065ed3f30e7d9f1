"""Celery entry point: `celery -A tasks worker --pool prefork` (run from the repository root).

Importing this module configures the app from FARM_* variables (see farm.celery_app) and loads
no GL: each pool process creates its own context in ``worker_process_init``.
"""

from farm.celery_app import app, render_batch_task

__all__ = ["app", "render_batch_task"]
