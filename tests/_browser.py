"""Headless Chromium for the tests of the HTML report, driven over the DevTools protocol on a
pipe (``--remote-debugging-pipe``: JSON messages ending in a NUL byte, the browser reading on
file descriptor 3 and writing on 4), so that no package and no browser download is needed:
Chromium comes from the machine's packages (.ci/run installs Debian's ``chromium``).

``Chromium.load(path)`` opens a file and waits for its load event, collecting what a person
would not see: console errors, uncaught exceptions, errors the browser logs (a refused fetch,
a broken image, a Content-Security-Policy violation) and every request the page made;
``evaluate`` then reads the page (images loaded, text shown).
"""

from __future__ import annotations

import json
import os
import select
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

import pytest

#: Names the browser goes by on Debian, Ubuntu and elsewhere; DPRANGE_CHROMIUM names another.
CANDIDATES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable", "headless_shell")


def find_chromium() -> str | None:
    """The Chromium binary: $DPRANGE_CHROMIUM, else the first of CANDIDATES on PATH, else None."""
    named = os.environ.get("DPRANGE_CHROMIUM")
    if named:
        return shutil.which(named) or (named if os.access(named, os.X_OK) else None)
    for name in CANDIDATES:
        found = shutil.which(name)
        if found:
            return found
    return None


def chromium_or_skip() -> str:
    """The binary; without one the test is skipped locally, but fails in CI (CI=true), where
    .ci/run installs it: a missing browser must not pass silently there."""
    binary = find_chromium()
    if binary is None:
        reason = "no Chromium found (chromium, chromium-browser or google-chrome on PATH, or DPRANGE_CHROMIUM)"
        if os.environ.get("CI", "").lower() not in ("", "0", "false"):
            pytest.fail(f"{reason}: CI must run the report's browser tests (.ci/run installs Debian's chromium)")
        pytest.skip(f"{reason}: the report's browser tests need it (apt-get install chromium)")
    return binary


class Chromium:
    """One headless browser (a context manager); :meth:`load` opens pages in one tab."""

    def __init__(self, binary: str, timeout: float = 60.0):
        self.timeout = timeout
        self.profile = tempfile.TemporaryDirectory(prefix="dprange-chromium-")
        to_browser_read, self._write = os.pipe()
        self._read, from_browser_write = os.pipe()

        def place_pipes():  # in the child: the protocol's descriptors 3 (commands) and 4 (replies)
            commands, replies = os.dup(to_browser_read), os.dup(from_browser_write)
            os.dup2(commands, 3)
            os.dup2(replies, 4)

        self.process = subprocess.Popen(
            [
                binary,
                "--headless",
                "--no-sandbox",  # CI runs as root
                "--disable-gpu",
                "--no-first-run",
                "--disable-extensions",
                "--disable-background-networking",
                "--remote-debugging-pipe",
                f"--user-data-dir={self.profile.name}",
                "about:blank",
            ],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            pass_fds=(3, 4),
            preexec_fn=place_pipes,
        )
        os.close(to_browser_read)
        os.close(from_browser_write)
        self._buffer = b""
        self._next_id = 0
        self.events: list[dict] = []
        target = self.send("Target.createTarget", {"url": "about:blank"})["targetId"]
        self.session = self.send("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
        for domain in ("Page", "Runtime", "Log", "Network"):
            self.send(f"{domain}.enable", session=True)

    # ------------------------------------------------------------ protocol
    def _message(self, deadline: float) -> dict:
        while b"\0" not in self._buffer:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([self._read], [], [], left)[0]:
                raise TimeoutError("Chromium did not answer in time")
            chunk = os.read(self._read, 1 << 20)
            if not chunk:
                raise RuntimeError("Chromium closed its DevTools pipe")
            self._buffer += chunk
        message, self._buffer = self._buffer.split(b"\0", 1)
        return json.loads(message)

    def send(self, method: str, params: dict | None = None, *, session: bool = False) -> dict:
        """Send one command and return its result (events that arrive meanwhile are kept)."""
        self._next_id += 1
        command = {"id": self._next_id, "method": method, "params": params or {}}
        if session:
            command["sessionId"] = self.session
        os.write(self._write, json.dumps(command).encode() + b"\0")
        deadline = time.monotonic() + self.timeout
        while True:
            message = self._message(deadline)
            if message.get("id") == self._next_id:
                if "error" in message:
                    raise RuntimeError(f"{method}: {message['error']}")
                return message.get("result", {})
            self.events.append(message)

    def wait_for(self, method: str) -> dict:
        deadline = time.monotonic() + self.timeout
        for i, event in enumerate(self.events):
            if event.get("method") == method:
                return self.events.pop(i)
        while True:
            message = self._message(deadline)
            if message.get("method") == method:
                return message
            self.events.append(message)

    # ------------------------------------------------------------ pages
    def load(self, path: str | Path) -> dict:
        """Open ``path`` and wait for its load event (every image decoded or failed); returns
        {"errors": [...], "requests": [...]}: console errors, exceptions and browser errors,
        and the URL of every request the page made (the page's own file:// URL included)."""
        self.events = []
        url = Path(path).resolve().as_uri()
        self.send("Page.navigate", {"url": url}, session=True)
        self.wait_for("Page.loadEventFired")
        self.send("Runtime.evaluate", {"expression": "1"}, session=True)  # flush the events sent before it
        errors, requests = [], []
        for event in self.events:
            method, params = event.get("method"), event.get("params", {})
            if method == "Runtime.consoleAPICalled" and params.get("type") in ("error", "assert", "warning"):
                errors.append(f"console.{params['type']}: {params.get('args')}")
            elif method == "Runtime.exceptionThrown":
                errors.append(f"exception: {params.get('exceptionDetails')}")
            elif method == "Log.entryAdded" and params["entry"].get("level") in ("error", "warning"):
                errors.append(f"log: {params['entry'].get('text')} {params['entry'].get('url', '')}")
            elif method == "Network.requestWillBeSent":
                requests.append(params["request"]["url"])
            elif method == "Network.loadingFailed":
                errors.append(f"failed load: {params.get('errorText')}")
        return {"errors": errors, "requests": requests}

    def evaluate(self, expression: str):
        """The value of a JavaScript expression in the open page (JSON-serialisable)."""
        result = self.send("Runtime.evaluate", {"expression": expression, "returnByValue": True}, session=True)
        if "exceptionDetails" in result:
            raise RuntimeError(f"evaluate {expression!r}: {result['exceptionDetails']}")
        return result["result"].get("value")

    def close(self) -> None:
        try:
            self.send("Browser.close")
        except (RuntimeError, TimeoutError, OSError):
            pass
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        os.close(self._read)
        os.close(self._write)
        self.profile.cleanup()

    def __enter__(self) -> Chromium:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
