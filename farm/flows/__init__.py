"""The farm's top floor: the whole stories the commands tell, each made of the layers below.

- pipeline: after a run, compare it with its goldens, approve what --update-goldens asks, write
  the report (`compare_job`: farm run, the nightly and the demo all call it);
- nightly: the nightly run, its index page and notification (no Celery import);
- demo: the project's own regression suite over its sample models.
"""
