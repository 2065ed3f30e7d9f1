"""What the command groups share: the usage error, argument types (checked by farm.settings'
rules), finding a run and its goldens, writing reports, the runner options."""

from __future__ import annotations

import argparse
import json
import re
import shlex
import sys
from pathlib import Path

from farm.environment import default_out
from farm.goldens import INDEX_NAME, find_goldens
from farm.report import write_report
from farm.report.markdown import IMAGES_HINT, published
from farm.report.text import summary_text
from farm.run.inputs import INPUT_MODES
from farm.run.jobs import JobState
from farm.settings import SettingError, check_image_base, check_msaa, check_size, check_team
from farm.store import open_store
from farm.thumbs.find import find_models
from renderer.assets.sources import archive_usage, is_archive
from renderer.context import Loaded
from renderer.errors import FormatError
from renderer.formats import load

__all__ = [
    "LATEST",
    "UsageError",
    "add_runner_options",
    "add_summary_args",
    "confirm",
    "goldens_dir",
    "image_base_arg",
    "job_ref",
    "load_model_arg",
    "load_job",
    "msaa_arg",
    "print_results",
    "reports_note",
    "results_json",
    "size_arg",
    "square_size_arg",
    "team_arg",
    "workers_arg",
    "write_reports",
]

LATEST = "latest"  # a run named `latest`: the newest job in the store
RUN_HELP = "job id (in --out), the path of its jobs/<id>.json, or 'latest' (the newest job in the store)"


class UsageError(RuntimeError):
    """A command line that cannot be carried out; printed as one sentence, exit status 2."""


def _arg(check, name: str, parse=int):
    def convert(text: str):
        try:
            value = parse(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{name} must be a whole number, not {text!r}") from None
        try:
            return check(value, name)
        except SettingError as e:
            raise argparse.ArgumentTypeError(str(e)) from None

    convert.__name__ = name.lstrip("-")
    return convert


def load_model_arg(path: str, strict: bool = False, **opts) -> Loaded:
    """The model a command was given (render, convert, inspect, view) with its context (what draws
    it: renderer.formats.load), or one sentence: the loader's
    (FormatError) or a bad loader option (Halo's --lod, --permutation, --regions), which the loaders
    report as ValueError; an archive given as the model is one sentence saying how to name an entry
    (ARCHIVE:ENTRY)."""
    if is_archive(path) and Path(path).is_file():
        raise UsageError(f"{archive_usage(path)}; farm inspect {path} lists them all")
    if Path(path).is_dir():
        raise UsageError(folder_usage(path))
    try:
        return load(path, strict=strict, **opts)
    except FormatError:
        raise
    except ValueError as e:
        raise UsageError(f"{path}: {e}") from None


def folder_models(path: str) -> list[str]:
    """The models under a folder (an extracted map too), archives' entries included, as paths to
    name on the command line (FOLDER/rel, ARCHIVE:ENTRY), in the order farm thumbnails takes them."""
    return [str(Path(path) / f.rel) for f in find_models([path])]


def folder_usage(path: str) -> str:
    """One sentence for a folder given where one model is wanted: the models it holds and what to run."""
    models = folder_models(path)
    if not models:
        return f"{path} is a folder holding no model (.mdx, .mdl, .model, .gbxmodel or an archive)"
    return (f"{path} is a folder, not a model: name one of its {len(models)} model(s), e.g. "
            f"{shlex.quote(models[0])}; farm inspect {shlex.quote(path)} lists them, farm thumbnails"
            f" {shlex.quote(path)} renders them all")


def size_arg(text: str) -> tuple[int, int]:
    """--size: WxH (or N for NxN), by farm.settings' rule."""
    try:
        return check_size(text, "--size")
    except SettingError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def square_size_arg(text: str) -> int:
    """--size of square images (thumbnails): N or NxN, by farm.settings' rule."""
    w, h = size_arg(text)
    if w != h:
        raise argparse.ArgumentTypeError(f"--size: thumbnails are square: N or NxN, not {text!r}")
    return w


team_arg = _arg(check_team, "--team")
msaa_arg = _arg(check_msaa, "--msaa")


MAX_WORKERS = 1024  # local processes: more is a typo (each holds a renderer and a GL context)


def workers_arg(text: str) -> int:
    text = str(text).strip()
    n = int(text) if re.fullmatch(r"[0-9]{1,5}", text) else 0  # ASCII digits: not '٣' or '1_0'
    if not 1 <= n <= MAX_WORKERS:
        raise argparse.ArgumentTypeError(f"--workers must be a whole number from 1 to {MAX_WORKERS}, got {text!r}")
    return n


def add_runner_options(s) -> None:
    s.add_argument("--out", help="output store (default: $FARM_OUT or ./farm-out)")
    s.add_argument("--broker", help="Celery broker URL (default: $FARM_BROKER_URL; neither, or 'local': a local"
                                    " process pool)")
    s.add_argument("--workers", type=workers_arg, help="local processes (default: one per core; with a broker,"
                                                        " the workers' --concurrency decides)")
    s.add_argument("--no-progress", action="store_true", help="no progress bar (and no progress lines in CI)")
    s.add_argument("--inputs", choices=INPUT_MODES, help="travel: the models, textures and tags go through the store"
                                                        " to workers that cannot see them; shared: workers open them"
                                                        " by path (default: $FARM_INPUTS, else auto: travel when"
                                                        " the store is s3://)")


def job_ref(ref: str, out: str | None) -> str:
    """`ref` itself, or for ``latest`` the id of the newest job in the store (by its job file's time)."""
    if ref != LATEST:
        return ref
    store = open_store(out or default_out())
    ids = store.job_ids()
    if not ids:
        raise UsageError(f"no jobs in {store.location}: 'latest' names the newest one (pass --out STORE)")

    def when(job_id: str) -> tuple:
        try:
            written = store.job_time(job_id)  # the store's time (a file's mtime, an object's LastModified)
            if written is not None:
                return (written, "", job_id)
            return (0.0, str(store.read_job(job_id).get("created") or ""), job_id)  # else when it was created
        except (OSError, ValueError, RuntimeError):
            return (0.0, "", job_id)

    return max(ids, key=when)


def load_job(ref: str, out: str | None) -> JobState:
    job = JobState.load(job_ref(ref, out), out)
    job.merge_worker_results()
    return job


def goldens_dir(explicit: str | None, job=None, manifest: str | None = None, required: bool = True) -> Path | None:
    folder = find_goldens(manifest or (job.data.get("manifest") if job is not None else None), explicit)
    if folder is None and Path("goldens", INDEX_NAME).is_file() and job is None:
        folder = Path("goldens")
    if folder is None and required:
        where = f" next to {manifest or job.data.get('manifest')}" if (manifest or job is not None) else ""
        raise UsageError(f"no golden index found{where} (index.jsonl in the manifest's folder or its goldens/);"
                         f" pass --goldens DIR (a new folder is created by the first `farm approve`)")
    return folder


def confirm(question: str, yes: bool, refuse: str) -> bool:
    """Ask `question` on the terminal (y/N); with `yes` the answer is yes. Without a terminal and
    without --yes: UsageError(`refuse`), a sentence saying to pass --yes."""
    if yes:
        return True
    if not (sys.stdin.isatty() and sys.stdout.isatty()):
        raise UsageError(refuse)
    try:
        answer = input(f"{question} [y/N] ")
    except EOFError:
        answer = ""
    return answer.strip().lower() in ("y", "yes")


def results_json(results: dict, report=None) -> dict:
    """A comparison as --json prints it: verdict, counts, problems, notes, per-trace status and reason."""
    return {"job": results.get("job"), "kind": results.get("kind"), "verdict": results.get("verdict"),
            "counts": results.get("counts"), "compared": results.get("compared"),
            "problems": results.get("problems", []), "notes": results.get("notes", []),
            "report": str(report) if report else None,
            "traces": {k: {"status": t["status"], "reason": t.get("reason")} for k, t in results["traces"].items()}}


def print_results(results: dict, as_json: bool = False, *, limit: int = 20, report=None, approve: bool = True) -> None:
    """A comparison's summary on stdout: the terminal text (`approve`: with its approve commands),
    or with --json `results_json`."""
    if as_json:
        print(json.dumps(results_json(results, report), indent=2, sort_keys=True))
    else:
        print(summary_text(results, limit=limit, report=report, approve=approve))


IMAGE_BASE_HELP = ("the absolute http(s) URL where the report folder is published, for the image links of"
                   " summary.md (images are in its img/), e.g. --image-base https://ci.example/job/7/report/;"
                   " without it summary.md has no image links (relative ones break once posted)")
REPORT_URL_HELP = ("the full report's link in summary.md (default: derived from --image-base); e.g."
                   " --report-url https://ci.example/job/7/report/index.html")


image_base_arg = _arg(check_image_base, "--image-base", parse=str)  # an absolute http(s) URL (farm.settings' rule)


def add_summary_args(s) -> None:
    """--image-base and --report-url: the links of summary.md (compare, report, diff, run, nightly)."""
    s.add_argument("--image-base", type=image_base_arg, metavar="URL", help=IMAGE_BASE_HELP)
    s.add_argument("--report-url", metavar="URL", help=REPORT_URL_HELP)


def write_reports(results: dict, folder: str | Path | None, image_base: str | None = None,
                  report_url: str | None = None) -> Path | None:
    """The report folder; without an absolute `image_base`, one line on stderr says that summary.md
    has no image links and how to get them (the summary says it too)."""
    if not folder:
        return None
    paths = write_report(results, folder, image_base=image_base, report_url=report_url)
    reports_note(paths, image_base)
    return paths["html"]


def reports_note(paths: dict | None, image_base: str | None) -> None:
    """The line on stderr after a report folder was written (`paths`: farm.report.write_report's)
    without an absolute `image_base`: summary.md has no image links, and how to get them."""
    if paths and not published(image_base):
        print(f"note: {paths['markdown']}: {IMAGES_HINT}", file=sys.stderr)
