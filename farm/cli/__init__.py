"""`farm ...`: the command line. One module per command group (models: inspect, convert, render;
jobs: run, status, retry, demo, nightly; thumbnails; goldens: compare, approve, reject, goldens,
report, serve, diff), each with `add_parsers(sub)` and `EXAMPLES` (command -> example lines, the
epilog of its --help); `main` parses, runs the command and turns every error a user can cause that
reaches it into one sentence on stderr and exit status 2 (`_run`; a command that reports a bad item
and goes on, or wants its own words, catches that error itself).

Conventions every command keeps (tests/test_cli_ux.py checks them):

- ``--out DIR``: where the command keeps its state: the store (farm-out) for jobs, goldens and
  reports; the output folder for `farm thumbnails` and `farm demo`. Default $FARM_OUT, farm.toml's
  ``store``, ./farm-out.
- ``-o PATH`` (``--output``): the one file or folder the command writes: `render`'s PNG, the report
  folder of `report`, `compare`, `run` and `diff` (`--report` is the same option).
- ``--size``: ``WxH`` or ``N`` (NxN), by farm.settings.check_size.
- ``--json``: machine-readable output (run, compare, diff, status, goldens, inspect).
- a run is named by its job id, by the path of its jobs/<id>.json, or ``latest`` (the newest job in
  the store).
- ``--trace PATTERN`` matches any part of a key: a substring, or a glob anywhere in it.
- farm.toml (farm.project.project) gives store, goldens, assets, broker and option defaults.
- ``-v``/``-q`` on every command: logging (farm.run.progress.configure_logging); -q prints errors
  only, whatever the command prints (farm.cli.quiet: stdout dropped but --json, stderr passes
  ``error`` lines) and turns progress off. Progress is a bar on a terminal and a line every few
  seconds in CI.
"""

from __future__ import annotations

import argparse
import os
import sys

from farm.cli import goldens, jobs, models, thumbnails, view
from farm.cli.common import UsageError
from farm.cli.parser import FarmParser
from farm.cli.quiet import errors_only
from farm.environment import check_environment, variables_help
from farm.escape import TerminalStream
from farm.goldens import GoldenError
from farm.plan.batches import TooManyFrames
from farm.plan.manifest import ManifestError
from farm.project import project
from farm.run.dispatch import RunnerUnavailable
from farm.run.jobs import JobError
from farm.run.progress import configure_logging
from farm.settings import SettingError
from farm.store.documents import StoreError
from farm.version import version_line
from renderer.errors import FormatError

__all__ = ["build_parser", "main"]

GROUPS = (models, jobs, thumbnails, goldens, view)  # the order `farm --help` lists the commands in


def _apply_project(sub: argparse._SubParsersAction) -> None:
    """farm.toml's [defaults] (and assets) become the defaults of every command that has the option."""
    proj = project()
    if proj is None:
        return
    defaults = dict(proj.defaults or {})
    if proj.assets:
        defaults.setdefault("assets", list(proj.assets))
    used = set()
    for parser in sub.choices.values():
        dests = {a.dest for a in parser._actions}
        chosen = {k: _checked_default(proj.path, parser, k, v) for k, v in defaults.items() if k in dests}
        if chosen:
            parser.set_defaults(**chosen)
            used |= set(chosen)
    unknown = sorted(set(proj.defaults or {}) - used)
    if unknown:
        raise SettingError(f"{proj.path}: [defaults] {', '.join(unknown)}: no command has such an option")


def _checked_default(path, parser: argparse.ArgumentParser, dest: str, value):
    """A farm.toml [defaults] value through the checks its option has on the command line (the
    option's `type`, each item of a list, and its `choices`), since set_defaults bypasses them."""
    action = next(a for a in parser._actions if a.dest == dest)
    items = value if isinstance(value, list) else [value]
    checked = []
    for item in items:
        try:
            one = action.type(str(item)) if action.type is not None and not isinstance(item, bool) else item
        except (argparse.ArgumentTypeError, ValueError, TypeError) as e:
            raise SettingError(f"{path}: [defaults] {dest} = {item!r}: {e}") from None
        if action.choices is not None and one not in action.choices:
            raise SettingError(f"{path}: [defaults] {dest} = {item!r}: must be one of"
                               f" {', '.join(map(str, action.choices))}")
        checked.append(one)
    return checked if isinstance(value, list) else checked[0]


def build_parser(with_project: bool = True) -> argparse.ArgumentParser:
    p = FarmParser(prog="farm", description="Headless render and regression-test farm for game models.",
                                epilog=variables_help() + "\n\nproject file: farm.toml in this folder or above it"
                                       " (store, goldens, assets, broker, [defaults]); see the README.",
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--version", action="version", version=version_line())
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for group in GROUPS:
        group.add_parsers(sub)
    for sp in sub.choices.values():
        sp.add_argument("-v", "--verbose", action="count", default=0, help="say more (-v: info, -vv: debug)")
        sp.add_argument("-q", "--quiet", action="store_true", help="only errors (no warnings, no progress)")
    for group in GROUPS:
        for name, lines in getattr(group, "EXAMPLES", {}).items():
            sp = sub.choices[name]
            sp.formatter_class = argparse.RawDescriptionHelpFormatter
            sp.epilog = "examples:\n" + "\n".join(f"  {line}" for line in lines)
    if with_project:
        _apply_project(sub)
    return p


def main(argv: list[str] | None = None) -> int:
    """The command line: what it prints reaches the terminal escaped (farm.escape.TerminalStream)."""
    out, err = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = TerminalStream(out), TerminalStream(err)
    try:
        return _main(argv)
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        sys.stdout, sys.stderr = out, err


def _main(argv: list[str] | None) -> int:
    try:
        parser = build_parser()
    except SettingError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    args = parser.parse_args(argv)
    if not args.quiet:
        return _run(args)
    if hasattr(args, "no_progress"):
        args.no_progress = True
    with errors_only(keep_stdout=bool(getattr(args, "json", False))):
        return _run(args)


def _run(args) -> int:
    """The command, behind the command line's error guard: an error a user can cause is one sentence, exit 2."""
    configure_logging(args.verbose, args.quiet)  # the handler writes to the stderr in force (quiet: errors only)
    try:
        check_environment()  # a bad FARM_* integer stops the command before it starts anything
        return args.func(args)
    except FormatError as e:
        print(f"error: {e.sentence()}", file=sys.stderr)
        return 2
    except (ManifestError, JobError, UsageError, GoldenError, SettingError, RunnerUnavailable, StoreError) as e:
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
