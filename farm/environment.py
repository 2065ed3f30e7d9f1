"""The FARM_* environment variables: every one declared here with what it does and its default,
and read through the functions here, nowhere else.

`FARM_VARIABLES` lists every ``FARM_*`` variable the farm reads, with what it does and its default
(`farm --help` prints it: `variables_help`; a test checks that the source reads no other). It is
the one place a default is written: `env_int` (the one parser of integer variables: a bad value is
an error naming the variable, never silently ignored) and `env_str` take theirs from it, so the
Celery app, the local pool, the nightly run and the workers cannot disagree. `default_out`,
`default_goldens`, `default_reports` and `broker_url` are the store, goldens, reports and broker
that commands use when none is given (the command line, then the environment, then farm.toml:
farm.project, then the built-in default).
"""

from __future__ import annotations

import importlib.util
import os
import re
import socket
import urllib.parse
from collections.abc import Mapping
from pathlib import Path

from farm.project import project
from farm.settings import SettingError, check_game

__all__ = [
    "BROKER_SCHEMES",
    "DEFAULT_OUT",
    "FARM_VARIABLES",
    "INT_BOUNDS",
    "broker_address",
    "broker_url",
    "check_broker",
    "check_environment",
    "check_reachable",
    "default_game",
    "default_goldens",
    "default_int",
    "default_out",
    "default_reports",
    "env_given",
    "env_int",
    "nightly_settings",
    "env_str",
    "redact_url",
    "variable_default",
    "variables_help",
]

DEFAULT_OUT = "farm-out"

# Every FARM_* variable: (name, what it does, default). `farm --help` prints this table.
FARM_VARIABLES: tuple[tuple[str, str, str], ...] = (
    ("FARM_OUT", "the store every command uses when --out is not given", "farm.toml store, else ./farm-out"),
    ("FARM_GOLDENS", "the goldens folder when --goldens is not given", "farm.toml goldens, else next to the"
                                                                       " manifest"),
    ("FARM_BROKER_URL", "Celery broker: set, batches go to Celery workers; unset or 'local': a local process"
                        " pool", "farm.toml broker, else local"),
    ("FARM_USER", "who approves and rejects (the golden log)", "git user.name <user.email>, else $USER"),
    ("FARM_SERVE_TOKEN", "farm serve: when set, the token every request needs, on any bind (required to bind"
                         " beyond loopback, --host 0.0.0.0 in a container); open the page with ?token=...", "-"),
    ("FARM_PROGRESS_EVERY", "seconds between progress lines when stderr is not a terminal (CI)", "10"),
    ("FARM_RESULT_BACKEND", "Celery result backend (progress states, batch results)", "the broker URL"),
    ("FARM_QUEUE", "Celery queue the batches go to and workers consume", "farm"),
    ("FARM_SOFT_TIME_LIMIT", "seconds a batch may take; then its remaining frames fail", "600"),
    ("FARM_TIME_LIMIT", "hard limit per batch: the worker's pool process is killed", "soft limit + 60"),
    ("FARM_VISIBILITY_TIMEOUT", "Redis redelivers an unacknowledged batch (a dead worker's) after this many"
                                " seconds; must exceed the hard limit", "hard limit + 60"),
    ("FARM_RESTORE_INTERVAL", "seconds between the sweeps that requeue unacknowledged batches", "10"),
    ("FARM_SOFT_SHUTDOWN_TIMEOUT", "seconds running batches get on a worker's warm shutdown before they are"
                                   " requeued", "0 (Celery's default)"),
    ("FARM_BROKER_RETRY_S", "seconds `farm run --broker` keeps reconnecting to a broker that went away", "300"),
    ("FARM_FRAME_TIME_LIMIT", "seconds one frame may take in a worker; then that frame fails (0: no limit)",
     "120"),
    ("FARM_MEMORY_LIMIT_MB", "private memory per worker process (RLIMIT_DATA); a frame over it fails (0: none)",
     "4096"),
    ("FARM_UNTRUSTED", "1: each batch renders in a child with no network, a read-only view of the files but the"
                       " store, and the caps below (farm/run/sandbox.py; farm thumbnails --untrusted)", "0"),
    ("FARM_UNTRUSTED_MEMORY_MB", "an untrusted batch's private memory (RLIMIT_DATA; FARM_MEMORY_LIMIT_MB when"
                                 " lower)", "2048"),
    ("FARM_UNTRUSTED_CPU_S", "an untrusted batch's CPU seconds (RLIMIT_CPU); its wall time is twice that plus 60",
     "300"),
    ("FARM_UNTRUSTED_FILE_MB", "the largest file an untrusted batch may write (RLIMIT_FSIZE)", "512"),
    ("FARM_STALL_GRACE_S", "a local worker silent for 2 x the frame limit + this many seconds is stopped", "30"),
    ("FARM_MAX_FRAMES", "the most frames one job may plan (0: as many as the coordinator's memory holds)", "0"),
    ("FARM_BATCH_FRAMES", "the most frames in one batch: longer sequences are cut, to spread over workers",
     "48"),
    ("FARM_GAME_DIR", "Warcraft III game data (folder or archives, os.pathsep-separated), searched last",
     "-"),
    ("FARM_INPUTS", "a job's inputs (models, textures, tags) travel with it through the store to workers that"
                    " cannot see them (travel), stay at their paths (shared), or auto: travel when the store is"
                    " s3://", "auto"),
    ("FARM_INPUT_CACHE", "a worker's cache of travelling inputs", "$XDG_CACHE_HOME/modelfarm/inputs"),
    ("FARM_INPUT_CACHE_MB", "the most the input cache holds; least recently used inputs go first", "2048"),
    ("FARM_MAX_TASKS_PER_CHILD", "recycle a worker pool process after this many batches", "100"),
    ("FARM_MAX_MEMORY_PER_CHILD", "... or when its resident memory exceeds this (KiB)", "2097152"),
    ("FARM_TASK_MAX_RETRIES", "retries of a batch after a transient failure", "3"),
    ("FARM_RETRY_BACKOFF", "first retry delay in seconds (doubles, capped, jittered)", "2"),
    ("FARM_RETRY_BACKOFF_MAX", "longest retry delay in seconds", "60"),
    ("FARM_MAX_DELIVERIES", "a batch whose worker died this many times fails", "3"),
    ("FARM_RENDERER", "the worker's renderer: gl, synthetic (tests) or module:factory", "gl"),
    ("FARM_GL_BACKEND", "GL backend of the gl renderer: auto, egl, osmesa, glfw", "auto"),
    ("FARM_SYNTHETIC_DELAY_MS", "milliseconds the synthetic renderer waits per frame (tests)", "0"),
    ("FARM_NIGHTLY_MANIFEST", "the nightly manifest; no nightly schedule without it", "-"),
    ("FARM_NIGHTLY_HOUR", "hour of the nightly run (0-23, UTC)", "2"),
    ("FARM_NIGHTLY_MINUTE", "minute of the nightly run (0-59)", "0"),
    ("FARM_NIGHTLY_REPORTS", "where dated nightly reports, status files and index.html go", "$FARM_OUT/nightly"),
    ("FARM_NIGHTLY_GOLDENS", "the nightly goldens folder", "found next to the manifest"),
    ("FARM_NIGHTLY_QUEUE", "the queue of the nightly task", "farm-nightly"),
    ("FARM_NIGHTLY_TIME_LIMIT", "seconds the whole nightly run may take", "43200"),
    ("FARM_NIGHTLY_NOTIFY", "after each night: a command (run with the summary on stdin) or an http(s) URL"
                            " (POSTed the status JSON)", "-"),
    ("FARM_NIGHTLY_STATE", "beat's state folder (its schedule file: celery beat --schedule)",
     "$FARM_NIGHTLY_REPORTS/state"),
    ("FARM_NIGHTLY_STATUS", "set for the notify command: pass, fail or error", "-"),
    ("FARM_NIGHTLY_DATE", "set for the notify command: the night's date (YYYY-MM-DD)", "-"),
    ("FARM_NIGHTLY_REPORT", "set for the notify command: the night's index.html", "-"),
)


def variable_default(name: str) -> str:
    """The default of a FARM_* variable as FARM_VARIABLES gives it (KeyError for a name it does not list)."""
    for n, _, default in FARM_VARIABLES:
        if n == name:
            return default
    raise KeyError(name)


# The integer FARM_* variables and their bounds (minimum, maximum or None): env_int checks a value
# against them wherever it is read, and check_environment checks them all before a command starts.
# Every one has an upper bound: a value past it is a typo or an attack, never a setting (a time
# limit of 10^26 s, a cache of 10^26 MiB).
_DAY, _WEEK = 24 * 3600, 7 * 24 * 3600
INT_BOUNDS: dict[str, tuple[int, int | None]] = {
    "FARM_PROGRESS_EVERY": (1, _DAY), "FARM_SOFT_TIME_LIMIT": (0, _WEEK), "FARM_TIME_LIMIT": (0, _WEEK),
    "FARM_VISIBILITY_TIMEOUT": (0, 2 * _WEEK), "FARM_RESTORE_INTERVAL": (0, _DAY),
    "FARM_SOFT_SHUTDOWN_TIMEOUT": (0, _DAY), "FARM_BROKER_RETRY_S": (0, _WEEK), "FARM_FRAME_TIME_LIMIT": (0, _DAY),
    "FARM_MEMORY_LIMIT_MB": (0, 1 << 24), "FARM_STALL_GRACE_S": (0, _DAY), "FARM_MAX_FRAMES": (0, 10 ** 9),
    "FARM_BATCH_FRAMES": (1, 10 ** 6), "FARM_MAX_TASKS_PER_CHILD": (0, 10 ** 9),
    "FARM_MAX_MEMORY_PER_CHILD": (0, 1 << 34), "FARM_TASK_MAX_RETRIES": (0, 1000), "FARM_RETRY_BACKOFF": (0, _DAY),
    "FARM_RETRY_BACKOFF_MAX": (0, _WEEK), "FARM_MAX_DELIVERIES": (1, 1000), "FARM_INPUT_CACHE_MB": (0, 1 << 24),
    "FARM_NIGHTLY_HOUR": (0, 23), "FARM_NIGHTLY_MINUTE": (0, 59),
    "FARM_NIGHTLY_TIME_LIMIT": (60, _WEEK), "FARM_UNTRUSTED": (0, 1), "FARM_UNTRUSTED_MEMORY_MB": (256, 1 << 24),
    "FARM_UNTRUSTED_CPU_S": (1, _DAY), "FARM_UNTRUSTED_FILE_MB": (1, 1 << 24),
}
# The least a non-zero value may be where less cannot work: a worker process holding a renderer and
# its GL context does not start in less (128 MiB fails every frame, 256 MiB renders the samples).
LEAST_WORKING: dict[str, tuple[int, str]] = {
    "FARM_MEMORY_LIMIT_MB": (256, "MiB: a worker process needs that much to start its renderer"),
}
_DIGITS = re.compile(r"-?[0-9]{1,30}")  # ASCII digits only: not '٣', '1_0', ' 1e3' or '+5'
RENDERERS = ("gl", "synthetic")  # FARM_RENDERER's own names; anything else is module:factory


def check_environment(environ: Mapping[str, str] | None = None) -> None:
    """Every integer FARM_* variable that is set, checked (SettingError for the first bad one), so a
    command fails before it starts anything rather than midway, when the variable is first read."""
    for name in INT_BOUNDS:
        env_int(name, None, environ)
    check_renderer(env_str("FARM_RENDERER", environ))


def check_renderer(kind: str) -> str:
    """FARM_RENDERER: gl, synthetic, or module:factory whose module can be found (found, not
    imported: the factory runs in the workers); else one SettingError sentence."""
    if kind in RENDERERS:
        return kind
    if not re.fullmatch(r"[A-Za-z_][\w.]*:[A-Za-z_][\w.]*", kind or "", re.ASCII):
        raise SettingError(f"FARM_RENDERER must be one of {', '.join(RENDERERS)} or module:factory (a module"
                           f" and a zero-argument callable in it), not {kind!r}")
    module = kind.partition(":")[0]
    try:
        found = importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):  # a parent package that is not there
        found = False
    if not found:
        raise SettingError(f"FARM_RENDERER={kind}: no module {module!r} can be imported here")
    return kind


# The renderer's own variables (it reads them itself: the renderer imports nothing of farm), for `farm --help`.
RENDERER_VARIABLES: tuple[tuple[str, str, str], ...] = (
    ("DECODE_CACHE_MB", "MiB of decoded textures a process keeps (renderer/assets/cache.py; 0: none)", "512"),
    ("RENDERER_GL_CHECK", "1: check every GL call and name the one that failed (slower; renderer/gl/calls.py)",
     "off: one check per frame"),
)


def variables_help() -> str:
    """The FARM_VARIABLES and RENDERER_VARIABLES tables as plain text (the epilog of `farm --help`)."""
    width = max(len(n) for n, _, _ in (*FARM_VARIABLES, *RENDERER_VARIABLES))
    lines = ["environment variables:"]
    for name, what, default in (*FARM_VARIABLES, *RENDERER_VARIABLES):
        lines.append(f"  {name:<{width}}  {what} (default: {default})")
    return "\n".join(lines)



def default_int(name: str) -> int:
    """The number FARM_VARIABLES gives as the default of an integer variable (its leading digits:
    "0 (Celery's default)" is 0); ValueError for a variable whose default is not a number."""
    m = re.match(r"\d+", variable_default(name))
    if not m:
        raise ValueError(f"{name}'s default ({variable_default(name)!r}) is not a number: pass one")
    return int(m.group())


_TABLE = object()  # env_int's default: the variable's default in FARM_VARIABLES


def env_int(name: str, default: int | None = _TABLE, environ: Mapping[str, str] | None = None, *,  # type: ignore[assignment]
            minimum: int | None = None, maximum: int | None = None) -> int | None:
    """An integer FARM_* variable: its default (FARM_VARIABLES', unless the caller passes one that
    depends on another variable, as FARM_TIME_LIMIT's on the soft limit) when unset or empty, else
    an int in minimum..maximum (the variable's `INT_BOUNDS` unless given; 0.. for one not listed
    there); any other value is a SettingError naming the variable, the value and what it must be
    (the command line's error guard prints it as one sentence; never silently ignored)."""
    if default is _TABLE:
        default = default_int(name)
    lo, hi = INT_BOUNDS.get(name, (0, None))
    minimum = lo if minimum is None else minimum
    maximum = hi if maximum is None else maximum
    env = os.environ if environ is None else environ
    raw = str(env.get(name, "")).strip()
    if not raw:
        return default
    if not _DIGITS.fullmatch(raw):
        where = f"from {minimum} to {maximum}" if maximum is not None else f">= {minimum}"
        raise SettingError(f"{name} must be an integer, not {raw[:40]!r} (ASCII digits, {where})")
    value = int(raw)
    if maximum is not None and not minimum <= value <= maximum:
        raise SettingError(f"{name} must be from {minimum} to {maximum}, not {raw[:40]}")
    if value < minimum:
        raise SettingError(f"{name} must be >= {minimum}, not {value}")
    least, why = LEAST_WORKING.get(name, (0, ""))
    if 0 < value < least:
        raise SettingError(f"{name}={value} is too little: 0 (no limit) or at least {least} {why}")
    return value


def env_str(name: str, environ: Mapping[str, str] | None = None) -> str | None:
    """A FARM_* variable's text: its value when set and not empty, else its default when
    FARM_VARIABLES gives a plain value (``farm``, ``gl``, ``auto``), else None (a default that
    is a description, such as "the broker URL", is the caller's to apply)."""
    env = os.environ if environ is None else environ
    value = env.get(name)
    if value:
        return value
    default = variable_default(name)
    return default if re.fullmatch(r"[\w.-]+", default) and default != "-" else None


def default_game(environ: Mapping[str, str] | None = None) -> tuple[str, ...]:
    """Game data named by FARM_GAME_DIR (a folder; several separated by os.pathsep), checked."""
    env = os.environ if environ is None else environ
    raw = [p for p in (env.get("FARM_GAME_DIR") or "").split(os.pathsep) if p.strip()]
    return check_game(raw, "FARM_GAME_DIR") if raw else ()


def default_out(environ: Mapping[str, str] | None = None) -> str:
    """The store commands use when none is given: FARM_OUT, else farm.toml's store, else ./farm-out."""
    env = os.environ if environ is None else environ
    if env.get("FARM_OUT"):
        return env["FARM_OUT"]
    proj = project()
    return (proj.store if proj and proj.store else None) or DEFAULT_OUT


def default_reports(environ: Mapping[str, str] | None = None, out: str | None = None) -> str:
    """Where nightly reports go when none is given: FARM_NIGHTLY_REPORTS, else <store>/nightly for a
    folder store (`out`, else `default_out`), else ./farm-out/nightly (reports are files to publish,
    even when the store is a URL)."""
    env = os.environ if environ is None else environ
    if env.get("FARM_NIGHTLY_REPORTS"):
        return env["FARM_NIGHTLY_REPORTS"]
    out = out or default_out(env)
    return str(Path(DEFAULT_OUT if "://" in out else out) / "nightly")


def default_goldens(environ: Mapping[str, str] | None = None) -> str | None:
    """The goldens folder when none is given: FARM_GOLDENS, else farm.toml's goldens (else None)."""
    env = os.environ if environ is None else environ
    if env.get("FARM_GOLDENS"):
        return env["FARM_GOLDENS"]
    proj = project()
    return proj.goldens if proj else None


def redact_url(url: str | None) -> str | None:
    """A broker URL fit to print or store: its password replaced by ***."""
    return re.sub(r"//([^:/@]*):[^@/]*@", r"//\1:***@", url) if url else url


BROKER_SCHEMES = ("redis", "rediss")  # Celery over Redis: the broker and (by default) the result backend


def check_broker(url: str, name: str = "--broker") -> str:
    """A broker URL `redis[s]://[user:password@]HOST[:PORT][/DB]`, checked as text (scheme, host,
    numeric port and database) or a SettingError naming `name` and the URL (password redacted)."""
    shown = redact_url(url)
    scheme, sep, rest = url.partition("://")
    if not sep or scheme not in BROKER_SCHEMES:
        raise SettingError(f"{name} {shown!r} is not a broker URL: expected redis://HOST:PORT/DB"
                           f" (scheme {' or '.join(BROKER_SCHEMES)})")
    try:  # what the Redis client parses it with: an unclosed '[' or a stray ']'
        parts = urllib.parse.urlsplit(url)
    except ValueError as e:
        raise SettingError(f"{name} {shown!r} is a malformed URL ({e}): expected redis://HOST:PORT/DB") from None
    if ("[" in parts.netloc) != ("]" in parts.netloc):
        raise SettingError(f"{name} {shown!r} is a malformed URL (unbalanced brackets): expected"
                           f" redis://HOST:PORT/DB")
    path = rest.partition("/")[2]
    host, colon, port = _host_port(url)
    if not host.strip("[]"):
        raise SettingError(f"{name} {shown!r} has no host: expected redis://HOST:PORT/DB")
    if colon and not (port.isdigit() and 0 < int(port) <= 65535):
        raise SettingError(f"{name} {shown!r}: the port must be a number from 1 to 65535, not {port!r}")
    db = path.split("?")[0]
    if db and not db.isdigit():
        raise SettingError(f"{name} {shown!r}: the database must be a number (redis://HOST:PORT/0), not {db!r}")
    return url


def _host_port(url: str) -> tuple[str, str, str]:
    """(host as written, ":" or "", port text) of a URL's HOST[:PORT], after any user:password@ (an
    [IPv6] host without a port stays whole)."""
    hostport = url.partition("://")[2].partition("/")[0].rpartition("@")[2]
    host, colon, port = hostport.rpartition(":") if not hostport.endswith("]") else (hostport, "", "")
    return (host, colon, port) if colon else (hostport, "", "")


def broker_address(url: str) -> tuple[str, int]:
    """(host, port) of a broker URL that check_broker accepted (Redis's port 6379 when none is given)."""
    host, _, port = _host_port(url)
    return host.strip("[]"), int(port) if port else 6379


BROKER_CONNECT_S = 5.0  # how long the first connection to a broker may take
_reached: set[str] = set()  # brokers this process has connected to once (broker_url checks each once)


def check_reachable(url: str) -> None:
    """One TCP connection to a broker (once per process and URL): one that refuses it (nothing
    listens there), an unknown host or no answer is a SettingError naming the URL, instead of a
    client that retries for ever. (A broker that goes away later, mid-run, is the Celery client's
    to wait for: FARM_BROKER_RETRY_S.)"""
    if url in _reached:
        return
    host, port = broker_address(url)
    try:
        socket.create_connection((host, port), timeout=BROKER_CONNECT_S).close()
    except OSError as e:
        why = e.strerror or str(e) or type(e).__name__
        raise SettingError(f"cannot reach the broker {redact_url(url)} ({host} port {port}): {why}; is Redis"
                           f" running there? (--broker local runs on this machine)") from None
    _reached.add(url)


def broker_url(broker: str | None = None, environ: Mapping[str, str] | None = None, *,
               reach: bool = False) -> str | None:
    """The broker to use: the argument, else FARM_BROKER_URL, else farm.toml's broker, else None
    (run locally). ``"local"`` runs locally even when FARM_BROKER_URL is set. The URL is checked
    (check_broker: the error names where it came from) and, with `reach` (what is about to use
    it: a run, thumbnails, dispatch), connected to once (check_reachable)."""
    env = os.environ if environ is None else environ
    if broker == "local":
        return None
    if broker:
        url = check_broker(broker, "--broker")
    elif env.get("FARM_BROKER_URL"):
        url = check_broker(env["FARM_BROKER_URL"], "FARM_BROKER_URL")
    else:
        proj = project()
        url = check_broker(proj.broker, f"{proj.path}: 'broker'") if proj and proj.broker else None
    if url and reach:
        check_reachable(url)
    return url


def env_given(name: str, environ: Mapping[str, str] | None = None) -> str | None:
    """A FARM_* variable's text when it is set and not empty, else None (no default: the caller's
    own fallback applies, such as the message's store or the app's queue)."""
    env = os.environ if environ is None else environ
    return env.get(name) or None


def nightly_settings(environ: Mapping[str, str] | None = None, *, manifest: str | None = None,
                     out: str | None = None, reports: str | None = None) -> dict | None:
    """The nightly settings from FARM_NIGHTLY_* (None when FARM_NIGHTLY_MANIFEST is not set): what the
    Celery app schedules (farm.celery.app), the nightly task's time limit and `farm nightly` use.
    `manifest`, `out` and `reports` (a command's flags) win over their variables, and what defaults
    from them follows (the reports beside the store given, the state beside those reports)."""
    env = os.environ if environ is None else environ
    manifest = (manifest or env.get("FARM_NIGHTLY_MANIFEST") or "").strip()
    if not manifest:
        return None
    out = out or default_out(env)
    reports = reports or default_reports(env, out)
    return {
        "manifest": manifest,
        "hour": env_int("FARM_NIGHTLY_HOUR", environ=env),
        "minute": env_int("FARM_NIGHTLY_MINUTE", environ=env),
        "reports": reports,
        "state": env.get("FARM_NIGHTLY_STATE") or str(Path(reports) / "state"),
        "notify": env.get("FARM_NIGHTLY_NOTIFY") or None,
        "goldens": env.get("FARM_NIGHTLY_GOLDENS") or None,
        "out": out,
        "queue": env_str("FARM_NIGHTLY_QUEUE", env),
        "time_limit": env_int("FARM_NIGHTLY_TIME_LIMIT", environ=env),
    }
