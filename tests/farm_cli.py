"""`farm` as a user runs it, for the command-line tests: `python -m farm.cli ARGS` in a subprocess
from the repository root, with headless EGL and a bare PATH (nothing from the test's environment)."""

from __future__ import annotations

import subprocess
import sys

from conftest import ROOT

ENV = {"EGL_PLATFORM": "surfaceless", "PYOPENGL_PLATFORM": "egl", "PATH": "/usr/bin:/bin"}


def farm(*args, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "farm.cli", *map(str, args)], cwd=ROOT, capture_output=True,
                          text=True, timeout=timeout, env=ENV)
