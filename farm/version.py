"""The installed modelfarm version, from the package metadata (pyproject.toml's ``version``).

`version_line()` is what `farm --version` and ``python -m farm.version`` print:
``farm VERSION (renderer RENDERER_VERSION, Python X.Y.Z)``; the image's smoke test and health check
run the latter (no argument parsing, no report templates).
"""

from __future__ import annotations

import sys
from importlib import metadata

from renderer.frame import RENDERER_VERSION

__all__ = ["DISTRIBUTION", "version", "version_line"]

DISTRIBUTION = "modelfarm"


def version() -> str:
    """The version of the installed distribution; ``0+unknown`` for a checkout that was never installed."""
    try:
        return metadata.version(DISTRIBUTION)
    except metadata.PackageNotFoundError:
        return "0+unknown"


def version_line() -> str:
    return f"farm {version()} (renderer {RENDERER_VERSION}, Python {sys.version.split()[0]})"


if __name__ == "__main__":
    print(version_line())
