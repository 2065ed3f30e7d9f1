"""What a runner raises that the command line says in one sentence (farm.cli): below the runners
(farm.run.local, farm.run.celery) and the dispatch that picks them, so neither imports the other."""

from __future__ import annotations

__all__ = ["RunnerUnavailable"]


class RunnerUnavailable(RuntimeError):
    """The runner cannot be reached (the broker stayed away longer than the client waits)."""
