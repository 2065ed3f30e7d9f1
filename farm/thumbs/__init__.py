"""`farm thumbnails`: a consistent, browsable thumbnail of every model under some folders.

Modules: `find` (the models under the roots, their ids, their asset roots), `work` (the worker
side: the "thumbnail" batch kind, sequence and time choice, encoding), `state` (incremental and
resumable state: journal + state file + lock), `sheets` (contact sheets, placeholder tiles),
`index` (index.json, index.html), `run` (`make_thumbnails`, the coordinator).

Rendering reuses the farm's runners unchanged: each model is a `farm.plan.batches.Batch` of kind
"thumbnail" (`farm.thumbs.work.THUMBNAIL`), which `farm.run.execute.render_batch` runs in the
worker processes of the local pool (farm.run.local) or of Celery (farm.celery), with the
process's one renderer (farm.run.worker); farm.run.dispatch picks the runner.
"""

from farm.thumbs.run import Summary, ThumbnailError, ThumbnailOptions, make_thumbnails

__all__ = ["Summary", "ThumbnailError", "ThumbnailOptions", "make_thumbnails"]
