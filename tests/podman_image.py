"""docker/Dockerfile built with podman, and commands run inside the image, for tests/test_image.py.

The base: a stand-in for the official `python:3.11-slim-bookworm`, made from Debian's mirror rather
than pulled from a registry (no registry login or mirror needed): `mmdebstrap --variant=minbase` of bookworm
with python3 and a venv at /opt/py first on PATH (Debian's own Python refuses `pip install` outside
a venv; the official image's Python is at /usr/local). It is imported as localhost/pybase:bookworm
and kept, with the image's layers, under build/image-cache/ (podman's storage of its own, vfs), keyed
by a hash of its recipe: a second run rebuilds nothing it does not have to.

Inside the image: `podman run` where it works; where it does not (this sandbox: `crun: setrlimit
RLIMIT_NPROC: Operation not permitted`), the image's mounted root under `unshare --fork --pid
--mount` with /proc, /dev, a tmpfs /tmp and HOME, and the test's folders bound in at their own
paths, `chroot --userspec=10001:10001 ROOT CMD` (the image's user; root where a test says why)
with the image's environment: the image's files and Python, the host's kernel and loopback network."""

from __future__ import annotations

import hashlib
import json
import os
import re
import shlex
import shutil
import subprocess
import time
from pathlib import Path

from conftest import ROOT

CACHE = ROOT / "build" / "image-cache"
STORAGE = ["--root", str(CACHE / "storage"), "--runroot", str(CACHE / "run"), "--storage-driver", "vfs"]
BASE = "localhost/pybase:bookworm"
IMAGE = "localhost/modelfarm-worker:test"
BUILD_STAGE = "localhost/modelfarm-build:test"
FIGURES = ROOT / "build" / "image-figures.json"
UID = 10001  # the image's `farm` user (docker/Dockerfile)

SUITE = "bookworm"
MIRROR = "http://deb.debian.org/debian"
INCLUDE = "ca-certificates,python3,python3-venv"
VENV_HOOK = 'chroot "$1" python3 -m venv /opt/py'
BASE_PATH = "/opt/py/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
BASE_ENV = {"PATH": BASE_PATH, "LANG": "C.UTF-8"}
KEY_LABEL = "modelfarm.base-recipe"
CONTEXT_LABEL = "modelfarm.build-inputs"


def podman(*args: str, check: bool = True, timeout: float = 1800, **kw) -> subprocess.CompletedProcess:
    r = subprocess.run(["podman", *STORAGE, *args], capture_output=True, text=True, timeout=timeout, **kw)
    if check and r.returncode:
        raise AssertionError(f"podman {' '.join(args[:3])} failed ({r.returncode}):\n"
                             f"{r.stdout[-3000:]}{r.stderr[-3000:]}")
    return r


def why_not() -> str | None:
    """None where the image can be built here, else the reason in one line."""
    if os.geteuid() != 0:
        return "building the image (mmdebstrap, podman's vfs storage, chroot) needs root"
    for tool in ("podman", "mmdebstrap", "unshare", "chroot"):
        if shutil.which(tool) is None:
            return f"{tool} is not installed (scripts/system-deps.sh installs podman and mmdebstrap as root)"
    probe = subprocess.run(["unshare", "--fork", "--pid", "--mount", "true"], capture_output=True, text=True)
    if probe.returncode:
        return f"cannot make pid and mount namespaces here: {probe.stderr.strip()}"
    return None


def base_key() -> str:
    recipe = {"suite": SUITE, "mirror": MIRROR, "include": INCLUDE, "hook": VENV_HOOK, "env": BASE_ENV}
    return hashlib.sha256(json.dumps(recipe, sort_keys=True).encode()).hexdigest()[:16]


def base_image_made() -> bool:
    """Makes localhost/pybase:bookworm (40-80 s) unless the stored one has this recipe; whether
    it made it."""
    key = base_key()
    have = podman("image", "inspect", "--format", f'{{{{index .Labels "{KEY_LABEL}"}}}}', BASE, check=False)
    if have.returncode == 0 and have.stdout.strip() == key:
        return False
    CACHE.mkdir(parents=True, exist_ok=True)
    tar = CACHE / f"base-{key}.tar"
    if not tar.exists():
        part = CACHE / f"base-{key}.part.tar"  # mmdebstrap picks the format by the name
        r = subprocess.run(["mmdebstrap", "--variant=minbase", f"--include={INCLUDE}", f"--customize-hook={VENV_HOOK}",
                            SUITE, str(part), MIRROR], capture_output=True, text=True, timeout=1800)
        assert r.returncode == 0, f"mmdebstrap failed:\n{r.stderr[-3000:]}"
        part.rename(tar)
    changes = [f"ENV {k}={v}" for k, v in BASE_ENV.items()] + [f"LABEL {KEY_LABEL}={key}", 'CMD ["python3"]']
    podman("import", *(a for c in changes for a in ("--change", c)), str(tar), BASE)
    for old in CACHE.glob("base-*.tar"):
        if old != tar:
            old.unlink()
    return True


def ca_bundle() -> Path | None:
    """The CA bundle pip uses on this host (behind a proxy that re-signs TLS it holds the proxy's
    CA): PIP_CERT, pip's `cert` setting, else the system bundle."""
    for candidate in (os.environ.get("PIP_CERT"), _pip_setting("cert"), "/etc/ssl/certs/ca-certificates.crt"):
        if candidate and Path(candidate).is_file():
            return Path(candidate)
    return None


def _pip_setting(name: str) -> str | None:
    r = subprocess.run(["python3", "-m", "pip", "config", "list"], capture_output=True, text=True)
    for line in r.stdout.splitlines():
        key, _, value = line.partition("=")
        if key.rsplit(".", 1)[-1] == name:
            return value.strip().strip("'\"")
    return None


def context_key() -> str:
    """A hash of what the build reads: the Dockerfile, the base's recipe and every file its COPY
    lines take from the repository (less what .dockerignore drops: caches)."""
    dockerfile = ROOT / "docker" / "Dockerfile"
    h = hashlib.sha256(dockerfile.read_bytes() + base_key().encode())
    sources = " ".join(re.findall(r"^COPY (?!--from)(.+) \S+$", dockerfile.read_text(), re.M)).split()
    for src in sorted(sources):
        paths = [ROOT / src] if (ROOT / src).is_file() else sorted((ROOT / src).rglob("*"))
        for f in paths:
            if f.is_file() and "__pycache__" not in f.parts and f.suffix != ".pyc":
                h.update(f"{f.relative_to(ROOT)}\0".encode() + f.read_bytes())
    return h.hexdigest()[:16]


def build(no_cache: bool = False) -> float | None:
    """docker/Dockerfile built on the base as IMAGE, as docker/README says (the CA bundle as the
    build secret `ca`, never a layer); the seconds it took, or None when IMAGE was built from these
    very inputs already (podman's own cache still steps through every layer: about 2 minutes on
    vfs)."""
    base_image_made()
    key = context_key()
    have = podman("image", "inspect", "--format", f'{{{{index .Labels "{CONTEXT_LABEL}"}}}}', IMAGE, check=False)
    if not no_cache and have.returncode == 0 and have.stdout.strip() == key:
        return None
    secret = [f"--secret=id=ca,src={ca}"] if (ca := ca_bundle()) else []
    args = ["build", "--isolation", "chroot", "--format", "docker", "--build-arg", f"PYTHON_IMAGE={BASE}", *secret,
            "--layers", "-f", "docker/Dockerfile"]
    start = time.monotonic()
    # The build stage tagged too, so that pruning the untagged leftovers of earlier builds (vfs keeps
    # a whole copy of the tree per layer: gigabytes each) keeps its dependency wheels cached.
    podman(*args, *(["--no-cache"] if no_cache else []), "--target", "build", "-t", BUILD_STAGE, ".", cwd=ROOT,
           timeout=3600)
    podman(*args, "--label", f"{CONTEXT_LABEL}={key}", "-t", IMAGE, ".", cwd=ROOT, timeout=3600)
    seconds = time.monotonic() - start
    podman("image", "prune", "--force")
    return seconds


def size_mb() -> float:
    return int(podman("image", "inspect", "--format", "{{.Size}}", IMAGE).stdout.strip()) / 1e6


def image_env() -> dict[str, str]:
    config = json.loads(podman("image", "inspect", IMAGE).stdout)[0]["Config"]
    return dict(e.split("=", 1) for e in config.get("Env") or [])


def podman_run_works() -> str | None:
    """None where `podman run` starts a container of the image, else its error in one line."""
    r = podman("run", "--rm", "--network", "host", IMAGE, "python", "-m", "farm.version", check=False, timeout=300)
    if r.returncode == 0:
        return None
    return (r.stderr.strip().splitlines() or [f"exit status {r.returncode}"])[-1]


class Inside:
    """Runs commands in the image as its user (uid 10001) with the image's environment, each of
    `binds` (folders under /tmp) at its own path and the host's loopback network: with `podman run`
    where it works, else in the image's mounted root (`podman image mount`) under unshare + chroot."""

    def __init__(self, podman_run: bool):
        self.podman_run = podman_run
        self.how = "podman run" if podman_run else "podman image mount + unshare --fork --pid --mount + chroot"
        self.env = image_env()
        self.root = None if podman_run else Path(podman("image", "mount", IMAGE).stdout.strip())

    def argv(self, argv: list[str], binds: list[Path], env: dict[str, str], uid: int = UID) -> list[str]:
        if self.podman_run:
            return ["podman", *STORAGE, "run", "--rm", "--network", "host", "--user", f"{uid}:{uid}",
                    *(f"-v={b}:{b}" for b in binds), *(f"-e={k}={v}" for k, v in env.items()), IMAGE, *argv]
        return chroot_command(self.root, argv, binds, {**self.env, **env}, uid)

    def run(self, argv: list[str], binds: list[Path] = (), env: dict[str, str] | None = None,
            timeout: float = 600) -> subprocess.CompletedProcess:
        return subprocess.run(self.argv(argv, list(binds), env or {}), capture_output=True, text=True,
                              timeout=timeout)

    def start(self, argv: list[str], binds: list[Path], env: dict[str, str], log: Path,
              uid: int = UID) -> subprocess.Popen:
        with open(log, "wb") as f:
            return subprocess.Popen(self.argv(argv, binds, env, uid), stdout=f, stderr=subprocess.STDOUT,
                                    start_new_session=True)

    def close(self) -> None:
        if self.root is not None:
            podman("image", "unmount", IMAGE, check=False)


def chroot_command(root: Path, argv: list[str], binds: list[Path], env: dict[str, str], uid: int = UID) -> list[str]:
    """`argv` as the image's user inside the image's root (see the module's docstring): each of
    `binds` (folders under /tmp) at its own path, /tmp and /home/farm tmpfs, nothing written to the
    image."""
    r = shlex.quote(str(root))
    steps = [f"mount -t proc proc {r}/proc", f"mount --rbind /dev {r}/dev",
             f"mount -t tmpfs -o size=512m,mode=1777 tmpfs {r}/tmp",
             f"mount -t tmpfs -o size=512m,uid={UID},gid={UID} tmpfs {r}/home/farm"]
    for b in binds:
        assert b.is_relative_to("/tmp"), b
        steps += [f"mkdir -p {r}{shlex.quote(str(b))}", f"mount --bind {shlex.quote(str(b))} {r}{shlex.quote(str(b))}"]
    inner = "cd /home/farm && exec " + " ".join(map(shlex.quote, argv))
    setenv = " ".join(shlex.quote(f"{k}={v}") for k, v in {**env, "HOME": "/home/farm"}.items())
    steps.append(f"exec chroot --userspec={uid}:{uid} {r} /usr/bin/env -i {setenv} /bin/sh -c {shlex.quote(inner)}")
    return ["unshare", "--fork", "--pid", "--mount", "--propagation", "private", "sh", "-c", " && ".join(steps)]
