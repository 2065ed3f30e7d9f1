"""`farm ...`: the command line. One module per command group (models: inspect, convert, render;
jobs: run, status, retry, demo; thumbnails; goldens: compare, approve, reject, goldens, report,
serve, diff), each with `add_parsers(sub)`; `main` parses, runs the command and turns every error a
user can cause into one sentence on stderr and exit status 2 (the one error guard).
"""

from __future__ import annotations

import argparse
import os
import sys

from farm.cli import goldens, jobs, models, thumbnails
from farm.cli.common import UsageError
from farm.goldens import GoldenError
from farm.plan.batches import TooManyFrames
from farm.plan.manifest import ManifestError
from farm.run.dispatch import RunnerUnavailable
from farm.run.jobs import JobError
from farm.settings import SettingError
from renderer.errors import FormatError

__all__ = ["build_parser", "main"]

GROUPS = (models, jobs, thumbnails, goldens)  # the order `farm --help` lists the commands in


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="farm", description="Headless render and regression-test farm for game models.")
    sub = p.add_subparsers(dest="command", required=True)
    for group in GROUPS:
        group.add_parsers(sub)
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except FormatError as e:
        print(f"error: {e.sentence()}", file=sys.stderr)
        return 2
    except (ManifestError, JobError, UsageError, GoldenError, SettingError, RunnerUnavailable) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    except BrokenPipeError:  # `farm inspect x | head`: the reader left; stop quietly
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except TooManyFrames as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    except OSError as e:  # an output that cannot be written: a folder given as a file, no permission, a full disk
        where = f"{e.filename}: " if e.filename else ""
        print(f"error: {where}{e.strerror or e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
