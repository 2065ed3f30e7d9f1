"""Moved to `renderer.rules` (format and render rules in one place); kept so older importers work."""

from renderer.rules import *  # noqa: F401,F403
