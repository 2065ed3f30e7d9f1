"""A published report as the source of a decision: `farm approve REPORT`, `farm reject REPORT`.

On CI the runner renders, writes its report folder, uploads it (an artifact, or a folder served
at a URL) and is thrown away; the reviewer approves on their own checkout from that folder alone.
What the report holds for that (written by farm.report.write_report):

    results.json   the comparison, each trace's status and its new frame's ``png`` (the sha256 of
                   the PNG bytes), and ``origin`` (`report_origin`): the report's folder name and URL,
                   the CI run that wrote it, and the goldens and manifest relative to the git work
                   tree's root (farm.repository), so the reviewer's clone finds its goldens
    img/ab/        every image, named by that sha256 (farm.report.images.image_relpath; `image_names`
                   also tries the flat img/ of reports written before the shards)

`open_report(ref)` reads a folder, or an http(s) URL of one (or of its index.html or results.json),
into a `ReportRun`: what farm.goldens.decisions takes as a run (id, traces, a store that gives the
images), with `origin` recorded in the decision. `ReportRun.fetch(keys)` reads the images of those
traces and checks each against the sha256 its results give: one that does not match refuses the
whole decision before anything is written (`ReportError`, one sentence).

Downloads: each file bounded in size (`MAX_RESULTS_BYTES`, `MAX_IMAGE_BYTES`) and time
(`TIMEOUT_S` per request, `DEADLINE_S` for the whole report); proxies from HTTP_PROXY/HTTPS_PROXY/
NO_PROXY (urllib's own handling), certificates from REQUESTS_CA_BUNDLE, SSL_CERT_FILE or
CURL_CA_BUNDLE when set, else the system's. A 404, a refused connection, a download cut short
(fewer bytes than its Content-Length) or a results file that is not JSON is one sentence.
"""

from __future__ import annotations

import hashlib
import json
import os
import ssl
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from http.client import HTTPException, IncompleteRead
from pathlib import Path

from farm.report.images import IMAGES, image_relpath
from farm.repository import relative_to_root, work_tree_root

__all__ = ["DEADLINE_S", "MAX_IMAGE_BYTES", "MAX_RESULTS_BYTES", "RESULTS_NAME", "TIMEOUT_S", "ReportError",
           "ReportRun", "ci_origin", "image_names", "is_report", "open_report", "report_origin"]

RESULTS_NAME = "results.json"
MAX_RESULTS_BYTES = 512 * 1024 * 1024  # a results file of about a million traces
MAX_IMAGE_BYTES = 64 * 1024 * 1024  # one frame's PNG
TIMEOUT_S = 30.0  # connecting, and each read of one request
DEADLINE_S = 900.0  # the whole report (results and the images a decision needs)
_PARALLEL = 8  # images downloaded at once
_CA_VARIABLES = ("REQUESTS_CA_BUNDLE", "SSL_CERT_FILE", "CURL_CA_BUNDLE")


class ReportError(ValueError):
    """A report that cannot be used (not found, cut short, an image that does not match): one sentence."""


def image_names(png: str) -> list[str]:
    """Where a report's image named by the sha256 `png` may be, relative to the report folder, in the
    order to try: where write_report puts it (farm.report.images.image_relpath, sharded), then the
    flat ``img/<png>.png`` of reports written before the shards."""
    return [image_relpath(png), f"{IMAGES}/{png}.png"]


# --------------------------------------------------------------------------------------------
# What the runner records


def ci_origin(environ: Mapping[str, str] | None = None) -> dict:
    """The CI run writing a report, from the CI's own variables (GitHub Actions, GitLab CI):
    ``{"provider", "run_url", "job_id"}`` (GitHub: and ``run_id``, what `gh run download` takes); {}
    outside CI."""
    env = os.environ if environ is None else environ
    if env.get("GITHUB_ACTIONS") == "true" and env.get("GITHUB_RUN_ID"):
        server = env.get("GITHUB_SERVER_URL", "https://github.com").rstrip("/")
        run = f"{server}/{env.get('GITHUB_REPOSITORY', '')}/actions/runs/{env['GITHUB_RUN_ID']}"
        if env.get("GITHUB_RUN_ATTEMPT"):
            run += f"/attempts/{env['GITHUB_RUN_ATTEMPT']}"
        return {"provider": "github", "run_url": run, "run_id": env["GITHUB_RUN_ID"],
                "job_id": env.get("GITHUB_JOB") or env["GITHUB_RUN_ID"]}
    if env.get("GITLAB_CI") == "true" and env.get("CI_JOB_ID"):
        return {"provider": "gitlab", "run_url": env.get("CI_JOB_URL") or env.get("CI_PIPELINE_URL"),
                "job_id": env["CI_JOB_ID"]}
    return {}


def report_origin(results: Mapping, out_dir: str | Path, report_url: str | None = None,
                  environ: Mapping[str, str] | None = None) -> dict:
    """What a report folder's results.json says about where it came from (see the module docstring);
    the goldens and manifest relative to the git work tree's root (outside one: the current folder)."""
    root = work_tree_root() or Path.cwd()
    return {"folder": Path(out_dir).absolute().name, "report_url": report_url or None,
            "ci": ci_origin(environ) or None,
            "goldens": relative_to_root(results.get("goldens"), root),
            "manifest": relative_to_root(results.get("manifest"), root)}


# --------------------------------------------------------------------------------------------
# Reading a report: a folder or a URL


def _is_url(ref: str) -> bool:
    return urllib.parse.urlsplit(ref).scheme in ("http", "https")


def _folder_of(ref: str) -> Path | None:
    p = Path(ref)
    if p.is_file() and p.name in (RESULTS_NAME, "index.html"):
        p = p.parent
    return p if (p / RESULTS_NAME).is_file() else None


def is_report(ref: str | None) -> bool:
    """Whether `ref` names a published report (an http(s) URL, or a folder holding results.json, or
    that folder's results.json or index.html) rather than a run in a store."""
    return bool(ref) and (_is_url(ref) or _folder_of(ref) is not None)


def _base_url(url: str) -> str:
    parts = urllib.parse.urlsplit(url)
    path = parts.path
    if path.rsplit("/", 1)[-1] in (RESULTS_NAME, "index.html"):
        path = path.rsplit("/", 1)[0] + "/"
    elif not path.endswith("/"):
        path += "/"
    return urllib.parse.urlunsplit((parts.scheme, parts.netloc, path, "", ""))


def _ssl_context() -> ssl.SSLContext:
    cafile = next((os.environ[v] for v in _CA_VARIABLES if os.environ.get(v)), None)
    try:
        return ssl.create_default_context(cafile=cafile)
    except (OSError, ssl.SSLError) as e:
        raise ReportError(f"cannot read the certificates in {cafile} (from {_CA_VARIABLES}): {e}") from None


class _Source:
    """The files of a report folder or of a report URL, each read whole and bounded in size."""

    def __init__(self, ref: str):
        self.url = _base_url(ref) if _is_url(ref) else None
        self.folder = None if self.url else _folder_of(ref)
        if self.url is None and self.folder is None:
            raise ReportError(f"{ref} is not a report folder (no {RESULTS_NAME} in it)")
        self.shown = self.url or str(self.folder)
        self.deadline = time.monotonic() + DEADLINE_S
        self._opener = urllib.request.build_opener(urllib.request.HTTPSHandler(context=_ssl_context())) \
            if self.url else None

    def read(self, rel: str, limit: int) -> bytes | None:
        """The bytes of `rel` (None: not there, a 404)."""
        if self.folder is not None:
            p = self.folder / rel
            if not p.is_file():
                return None
            if p.stat().st_size > limit:
                raise ReportError(f"{p}: {p.stat().st_size:,} bytes, more than a report file may have ({limit:,})")
            return p.read_bytes()
        return self._download(self.url + rel, limit)

    def _download(self, url: str, limit: int) -> bytes | None:
        left = self.deadline - time.monotonic()
        if left <= 0:
            raise ReportError(f"{url}: the report took longer than {DEADLINE_S:.0f} s to download; nothing written")
        req = urllib.request.Request(url, headers={"User-Agent": "modelfarm"})
        try:
            with self._opener.open(req, timeout=min(TIMEOUT_S, left)) as resp:
                return _read_body(url, resp, limit, self.deadline)
        except urllib.error.HTTPError as e:
            if e.code in (404, 410):
                return None
            raise ReportError(f"{url}: the server answered HTTP {e.code} ({e.reason})") from None
        except IncompleteRead as e:
            raise ReportError(f"{url}: the download stopped after {len(e.partial):,} bytes of"
                              f" {len(e.partial) + (e.expected or 0):,}; nothing written") from None
        except urllib.error.URLError as e:
            raise ReportError(f"cannot download {url}: {e.reason}") from None
        except (TimeoutError, HTTPException, OSError) as e:
            raise ReportError(f"cannot download {url}: {e or type(e).__name__}") from None


def _read_body(url: str, resp, limit: int, deadline: float) -> bytes:
    length = resp.headers.get("Content-Length")
    expected = int(length) if length and length.isdigit() else None
    if expected is not None and expected > limit:
        raise ReportError(f"{url}: {expected:,} bytes, more than a report file may have ({limit:,})")
    chunks, got = [], 0
    while True:
        if time.monotonic() > deadline:
            raise ReportError(f"{url}: the report took longer than {DEADLINE_S:.0f} s to download; nothing written")
        chunk = resp.read(1 << 16)
        if not chunk:
            break
        got += len(chunk)
        if got > limit:
            raise ReportError(f"{url}: more than a report file may have ({limit:,} bytes)")
        chunks.append(chunk)
    if expected is not None and got != expected:
        raise ReportError(f"{url}: the download stopped after {got:,} bytes of {expected:,}; nothing written")
    return b"".join(chunks)


class _ReportImages:
    """The report as the store farm.goldens.decisions reads a run's images from: only the images
    `ReportRun.fetch` read and checked."""

    kind = "report"

    def __init__(self, location: str):
        self.location = location
        self.images: dict[str, bytes] = {}

    def read_image(self, png: str) -> bytes:
        if png not in self.images:
            raise FileNotFoundError(2, "not read from the report", png)
        return self.images[png]

    def read_sidecar(self, png: str) -> dict:
        raise FileNotFoundError(2, "a report has no sidecars (the PNG's own trace names its GL)", png)


def _trace_state(t: Mapping) -> dict:
    """A report trace as a run's trace state (farm.run.jobs): done with its PNG, else failed."""
    if t.get("png"):
        return {"status": "done", "digest": t["png"], "missing": list(t.get("missing") or ()),
                "time_ms": t.get("time_ms")}
    return {"status": "failed", "error": t.get("reason") or f"no frame in the report ({t.get('status')})",
            "time_ms": t.get("time_ms")}


class ReportRun:
    """A published report as a run for approve and reject (see the module docstring)."""

    def __init__(self, source: _Source, results: dict):
        if results.get("kind") == "diff":
            raise ReportError(f"{source.shown} is a `farm diff` report: approve from a comparison with goldens")
        if not isinstance(results.get("traces"), dict) or not results.get("job"):
            raise ReportError(f"{source.shown}: {RESULTS_NAME} is not a comparison's results (no job or traces)")
        self.source, self.results = source, results
        self.id = str(results["job"])
        self.traces = {k: _trace_state(t) for k, t in results["traces"].items()}
        self.store = _ReportImages(source.shown)
        self.origin_doc = results.get("origin") or {}
        root = work_tree_root() or Path.cwd()
        manifest = self.origin_doc.get("manifest")
        self.data = {"manifest": str(root / manifest) if manifest else None}
        self.goldens = root / self.origin_doc["goldens"] if self.origin_doc.get("goldens") else None

    @property
    def origin(self) -> dict:
        """What the decision's log record keeps about where it came from."""
        ci = self.origin_doc.get("ci") or {}
        shown = self.source.url or relative_to_root(self.source.folder, Path.cwd()) or str(self.source.folder)
        rec = {"report": shown}
        if ci.get("run_url"):
            rec["ci_run"] = ci["run_url"]
        if ci.get("job_id"):
            rec["ci_job"] = str(ci["job_id"])
        return rec

    def fetch(self, keys: Iterable[str]) -> None:
        """Read the images of `keys` (those that rendered) from the report and check each against
        the sha256 its results give; ReportError (nothing read is kept) on the first that is
        missing or does not match."""
        wanted = sorted({self.traces[k]["digest"] for k in keys
                         if self.traces.get(k, {}).get("status") == "done"} - set(self.store.images))
        by_png = {self.traces[k]["digest"]: k for k in sorted(self.traces, reverse=True)
                  if self.traces[k].get("digest")}
        with ThreadPoolExecutor(max_workers=_PARALLEL if self.source.url else 1) as pool:
            found = list(pool.map(self._image, wanted))
        for png, (name, data) in zip(wanted, found, strict=True):
            where = f"{self.source.shown.rstrip('/')}/{name}"
            if data is None:
                raise ReportError(f"{by_png[png]}: its image {png[:12]}... is not in the report ({where});"
                                  f" nothing written")
            if hashlib.sha256(data).hexdigest() != png:
                raise ReportError(f"{by_png[png]}: the report's image {where} does not match the sha256 its"
                                  f" {RESULTS_NAME} gives ({png[:12]}...); nothing written")
        self.store.images.update(zip(wanted, (data for _, data in found), strict=True))

    def _image(self, png: str) -> tuple[str, bytes | None]:
        names = image_names(png)
        for name in names:
            data = self.source.read(name, MAX_IMAGE_BYTES)
            if data is not None:
                return name, data
        return names[0], None


def open_report(ref: str) -> ReportRun:
    """The report folder or URL `ref` as a run (its results read and checked; no image read yet)."""
    source = _Source(ref)
    data = source.read(RESULTS_NAME, MAX_RESULTS_BYTES)
    if data is None:
        raise ReportError(f"{source.shown.rstrip('/')}/{RESULTS_NAME}: not found (HTTP 404): no report is"
                          f" published there" if source.url else f"{source.shown}: no {RESULTS_NAME}")
    try:
        results = json.loads(data)
    except (ValueError, UnicodeDecodeError) as e:
        raise ReportError(f"{source.shown.rstrip('/')}/{RESULTS_NAME} is not JSON ({e}); a download cut short?"
                          f" nothing written") from None
    if not isinstance(results, dict):
        raise ReportError(f"{source.shown.rstrip('/')}/{RESULTS_NAME} is not a comparison's results")
    return ReportRun(source, results)
