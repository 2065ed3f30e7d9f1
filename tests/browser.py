"""Headless Chromium for the report tests, driven through chromedriver's W3C WebDriver HTTP API
with the standard library only (no Selenium, so nothing ever tries to download a driver).

    with Browser() as b:
        b.get("file:///.../index.html")
        b.click(b.find("#views button[data-view=slider]"))
        assert b.severe_logs() == []

Chromium's console (console.error, uncaught exceptions, failed loads, CSP violations) is read from
the "browser" log (goog:loggingPrefs). `available()` says why the browser cannot run, or None.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import tempfile
import time
import urllib.error
import urllib.request

CHROMIUM = os.environ.get("FARM_TEST_CHROMIUM", "/usr/bin/chromium")
CHROMEDRIVER = os.environ.get("FARM_TEST_CHROMEDRIVER", "/usr/bin/chromedriver")
ELEMENT = "element-6066-11e4-a52e-4f735466cecf"
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--disable-dev-shm-usage", "--window-size=1280,1000"]


def available() -> str | None:
    for path, pkg in ((CHROMIUM, "chromium"), (CHROMEDRIVER, "chromium-driver")):
        if not os.access(path, os.X_OK):
            return f"{path} is missing (Debian package {pkg}; scripts/system-deps.sh installs it)"
    return None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class WebDriverError(RuntimeError):
    pass


class Browser:
    def __init__(self, timeout: float = 30.0):
        self.port = _free_port()
        self.profile = tempfile.mkdtemp(prefix="farm-chromium-")
        self.log = open(os.path.join(self.profile, "chromedriver.log"), "wb")  # noqa: SIM115
        self.proc = subprocess.Popen([CHROMEDRIVER, f"--port={self.port}", "--allowed-ips=127.0.0.1"],
                                     stdout=self.log, stderr=subprocess.STDOUT, start_new_session=True)
        self.base = f"http://127.0.0.1:{self.port}"
        self.session = None
        deadline = time.monotonic() + timeout
        while True:
            try:
                if self._call("GET", "/status").get("ready"):
                    break
            except (OSError, WebDriverError):
                pass
            if time.monotonic() > deadline or self.proc.poll() is not None:
                self.close()
                raise WebDriverError("chromedriver did not start")
            time.sleep(0.05)
        caps = {"capabilities": {"alwaysMatch": {
            "browserName": "chrome",
            "goog:chromeOptions": {"binary": CHROMIUM, "args": [*FLAGS, f"--user-data-dir={self.profile}/data"]},
            "goog:loggingPrefs": {"browser": "ALL"},
        }}}
        try:
            self.session = self._call("POST", "/session", caps)["sessionId"]
        except Exception:
            self.close()
            raise

    # --- protocol
    def _call(self, method: str, path: str, body: dict | None = None):
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(self.base + path, data=data, method=method,
                                     headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=60) as r:
                out = json.loads(r.read() or b"{}")
        except urllib.error.HTTPError as e:
            try:
                detail = json.loads(e.read()).get("value", {})
            except ValueError:
                detail = {}
            raise WebDriverError(f"{method} {path}: {detail.get('error')}: {detail.get('message')}") from None
        return out.get("value", out)

    def _s(self, method: str, path: str, body: dict | None = None):
        return self._call(method, f"/session/{self.session}{path}", body)

    # --- pages and elements
    def get(self, url: str) -> None:
        self._s("POST", "/url", {"url": url})

    def run(self, script: str, *args):
        return self._s("POST", "/execute/sync", {"script": script, "args": list(args)})

    def find(self, css: str) -> dict:
        return self._s("POST", "/element", {"using": "css selector", "value": css})

    def find_all(self, css: str) -> list[dict]:
        return self._s("POST", "/elements", {"using": "css selector", "value": css})

    def click(self, el: dict) -> None:
        self._s("POST", f"/element/{el[ELEMENT]}/click", {})

    def hover(self, el: dict) -> None:
        self._s("POST", "/actions", {"actions": [{"type": "pointer", "id": "mouse",
                                                  "parameters": {"pointerType": "mouse"},
                                                  "actions": [{"type": "pointerMove", "duration": 0,
                                                               "origin": el, "x": 0, "y": 0}]}]})

    def move_away(self) -> None:
        self._s("POST", "/actions", {"actions": [{"type": "pointer", "id": "mouse",
                                                  "parameters": {"pointerType": "mouse"},
                                                  "actions": [{"type": "pointerMove", "duration": 0,
                                                               "origin": "viewport", "x": 1, "y": 1}]}]})

    def wait_for(self, script: str, *args, timeout: float = 10.0):
        deadline = time.monotonic() + timeout
        while True:
            value = self.run(script, *args)
            if value:
                return value
            if time.monotonic() > deadline:
                raise WebDriverError(f"timed out waiting for: {script}")
            time.sleep(0.05)

    def logs(self) -> list[dict]:
        return self._s("POST", "/se/log", {"type": "browser"})

    def severe_logs(self) -> list[dict]:
        return [e for e in self.logs() if e.get("level") == "SEVERE"]

    def screenshot(self, path: str) -> None:
        import base64

        with open(path, "wb") as f:
            f.write(base64.b64decode(self._s("GET", "/screenshot")))

    # --- lifetime
    def close(self) -> None:
        if self.session:
            try:
                self._s("DELETE", "")
            except (OSError, WebDriverError):
                pass
            self.session = None
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        self.log.close()
        shutil.rmtree(self.profile, ignore_errors=True)

    def __enter__(self) -> Browser:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
