"""The installed modelfarm version, from the package metadata (pyproject.toml's ``version``).

``python -m farm.version`` prints ``farm VERSION``: the image's smoke test and health check use it
until `farm --version` exists (wire it in farm.cli.build_parser with
``p.add_argument("--version", action="version", version=version_line())``).
"""

from __future__ import annotations

from importlib import metadata

__all__ = ["DISTRIBUTION", "version", "version_line"]

DISTRIBUTION = "modelfarm"


def version() -> str:
    """The version of the installed distribution; ``0+unknown`` for a checkout that was never installed."""
    try:
        return metadata.version(DISTRIBUTION)
    except metadata.PackageNotFoundError:
        return "0+unknown"


def version_line() -> str:
    return f"farm {version()}"


if __name__ == "__main__":
    print(version_line())
