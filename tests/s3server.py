"""A real S3-protocol server for the tests: `moto_server` on a spare loopback port, started and
stopped by the `s3` fixture, reached through a small TCP proxy the tests can cut (moto keeps its
objects in memory, so stopping the server would lose them; cutting the proxy is the store being
unreachable while its data lives on). `store_env` points this process's environment at it."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

MOTO = shutil.which("moto_server") or str(Path(sys.executable).with_name("moto_server"))
BUCKET = "farm-test"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Proxy:
    """A TCP proxy to moto. `cut()`: every connection, open or new, is reset at once (counted in
    `refused`) until `restore()`."""

    def __init__(self, target: int):
        self.target = target
        self.port = _free_port()
        self.cut_off = False
        self.refused = 0
        self.conns: list[socket.socket] = []
        self.lock = threading.Lock()
        self.server = socket.create_server(("127.0.0.1", self.port))
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.server.accept()
            except OSError:
                return
            if self.cut_off:
                self.refused += 1
                _reset(client)
                continue
            try:
                upstream = socket.create_connection(("127.0.0.1", self.target))
            except OSError:
                _reset(client)
                continue
            with self.lock:
                self.conns += [client, upstream]
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pipe, args=(a, b), daemon=True).start()

    def _pipe(self, a: socket.socket, b: socket.socket) -> None:
        try:
            while data := a.recv(65536):
                b.sendall(data)
        except OSError:
            pass
        finally:
            for s in (a, b):
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

    def cut(self) -> None:
        self.cut_off = True
        with self.lock:
            for s in self.conns:
                _reset(s)
            self.conns.clear()

    def restore(self) -> None:
        self.cut_off = False


def _reset(s: socket.socket) -> None:
    try:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
        s.close()
    except OSError:
        pass


class S3:
    def __init__(self, tmp: Path):
        self.port = _free_port()
        self.proc = subprocess.Popen([MOTO, "-H", "127.0.0.1", "-p", str(self.port)], stdout=subprocess.DEVNULL,
                                     stderr=subprocess.DEVNULL, start_new_session=True)
        deadline = time.monotonic() + 30
        while True:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.5).close()
                break
            except OSError:
                assert time.monotonic() < deadline, "moto_server did not start"
                time.sleep(0.1)
        self.proxy = Proxy(self.port)
        self.env = {k: v for k, v in os.environ.items() if not k.startswith(("FARM_", "AWS_"))}
        self.env.update(AWS_ENDPOINT_URL=f"http://127.0.0.1:{self.proxy.port}", AWS_ACCESS_KEY_ID="testing",
                        AWS_SECRET_ACCESS_KEY="testing", AWS_DEFAULT_REGION="us-east-1",
                        AWS_CONFIG_FILE=str(tmp / "none"), AWS_SHARED_CREDENTIALS_FILE=str(tmp / "none"),
                        EGL_PLATFORM="surfaceless", PYOPENGL_PLATFORM="egl", PYTHONUNBUFFERED="1")
        import boto3

        self.client = boto3.client("s3", endpoint_url=f"http://127.0.0.1:{self.port}", aws_access_key_id="testing",
                                   aws_secret_access_key="testing", region_name="us-east-1")
        self.client.create_bucket(Bucket=BUCKET)

    def keys(self, prefix: str) -> list[str]:
        pages = self.client.get_paginator("list_objects_v2").paginate(Bucket=BUCKET, Prefix=prefix + "/")
        return sorted(o["Key"][len(prefix) + 1:] for p in pages for o in p.get("Contents", ()))

    def get(self, key: str) -> bytes:
        return self.client.get_object(Bucket=BUCKET, Key=key)["Body"].read()

    def stop(self) -> None:
        self.proc.kill()
        self.proc.wait(10)


@pytest.fixture(scope="module")
def s3(tmp_path_factory):
    server = S3(tmp_path_factory.mktemp("aws"))
    yield server
    server.stop()


@pytest.fixture
def store_env(s3, monkeypatch):
    """This process's environment pointed at the server (for S3Store used in-process)."""
    for k in [k for k in os.environ if k.startswith("AWS_")]:
        monkeypatch.delenv(k)
    for k, v in s3.env.items():
        if k.startswith("AWS_"):
            monkeypatch.setenv(k, v)
    return s3


