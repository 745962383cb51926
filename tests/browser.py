"""A headless Chromium for the tests that look at pages as a reader would (the site, the learner's
JupyterLab), driven over the Chrome DevTools protocol with websocket-client (a JupyterLab dependency,
pinned in requirements.txt): no browser download, Debian's ``chromium`` package.

    with Chromium() as browser:
        page = browser.new_page()
        page.goto("http://127.0.0.1:8000/index.html")
        page.evaluate("document.title"); page.errors; page.requests; page.screenshot(path)
"""
from __future__ import annotations

import base64
import itertools
import json
import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path
from urllib.request import Request, urlopen

INSTALL = "apt-get update && apt-get install -y chromium"
# Chromium as root, headless, quiet: no sandbox (root), no GPU, no QUIC, no calls home, a fresh profile.
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--disable-dev-shm-usage", "--hide-scrollbars", "--mute-audio", "--window-size=1280,900"]


def chromium_path() -> str | None:
    for name in ("chromium", "chromium-browser", "google-chrome"):
        found = shutil.which(name)
        if found:
            return found
    return None


class BrowserError(RuntimeError):
    pass


class Page:
    """One tab. Every console error, uncaught exception and failed request is kept in ``errors``;
    every URL the page asked for in ``requests``."""

    def __init__(self, ws_url: str):
        import websocket  # websocket-client

        self.ws = websocket.create_connection(ws_url, timeout=60, suppress_origin=True)
        self.ids = itertools.count(1)
        self.events: list[dict] = []
        self.errors: list[str] = []
        self.requests: list[str] = []
        for domain in ("Page", "Runtime", "Log", "Network"):
            self.send(f"{domain}.enable")

    def _note(self, message: dict) -> None:
        method, params = message.get("method"), message.get("params", {})
        self.events.append(message)
        if method == "Runtime.consoleAPICalled" and params.get("type") in ("error", "assert"):
            self.errors.append("console: " + " ".join(str(a.get("value", a.get("description", "")))
                                                      for a in params.get("args", [])))
        elif method == "Runtime.exceptionThrown":
            details = params.get("exceptionDetails", {})
            self.errors.append("exception: " + str(details.get("exception", {}).get("description")
                                                   or details.get("text")))
        elif method == "Log.entryAdded" and params.get("entry", {}).get("level") == "error":
            entry = params["entry"]
            self.errors.append(f"log: {entry.get('text')} {entry.get('url', '')}".strip())
        elif method == "Network.requestWillBeSent":
            self.requests.append(params.get("request", {}).get("url", ""))
        elif method == "Network.loadingFailed" and not params.get("canceled"):
            self.errors.append(f"request failed: {params.get('errorText')}")

    def send(self, method: str, timeout: float = 60, **params) -> dict:
        ident = next(self.ids)
        self.ws.send(json.dumps({"id": ident, "method": method, "params": params}))
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            message = json.loads(self.ws.recv())
            if message.get("id") == ident:
                if "error" in message:
                    raise BrowserError(f"{method}: {message['error']}")
                return message.get("result", {})
            self._note(message)
        raise BrowserError(f"{method}: no answer within {timeout} s")

    def wait_for_event(self, method: str, timeout: float = 60) -> dict:
        deadline = time.monotonic() + timeout
        self.ws.settimeout(timeout)
        while time.monotonic() < deadline:
            message = json.loads(self.ws.recv())
            self._note(message)
            if message.get("method") == method:
                return message.get("params", {})
        raise BrowserError(f"no {method} within {timeout} s")

    def goto(self, url: str, timeout: float = 60) -> None:
        self.events.clear()
        self.errors.clear()
        self.requests.clear()
        result = self.send("Page.navigate", url=url)
        if result.get("errorText"):
            raise BrowserError(f"{url}: {result['errorText']}")
        self.wait_for_event("Page.loadEventFired", timeout)

    def evaluate(self, expression: str, timeout: float = 60):
        """The value of a JavaScript expression (a promise is awaited)."""
        result = self.send("Runtime.evaluate", timeout=timeout, expression=expression, awaitPromise=True,
                           returnByValue=True)
        if "exceptionDetails" in result:
            raise BrowserError(f"{expression[:80]}...: {result['exceptionDetails']}")
        return result["result"].get("value")

    def wait_until(self, expression: str, timeout: float = 60, every: float = 0.25):
        """Evaluate ``expression`` until it is truthy; returns its value."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            value = self.evaluate(expression)
            if value:
                return value
            time.sleep(every)
        raise BrowserError(f"still false after {timeout} s: {expression}")

    def click(self, x: float, y: float) -> None:
        """A real mouse click at (x, y) of the page, as a person's."""
        for kind in ("mousePressed", "mouseReleased"):
            self.send("Input.dispatchMouseEvent", type=kind, x=x, y=y, button="left", clickCount=1)

    def screenshot(self, path: Path, full_page: bool = False) -> Path:
        params = {"format": "png"}
        if full_page:
            metrics = self.send("Page.getLayoutMetrics")["cssContentSize"]
            params.update(captureBeyondViewport=True,
                          clip={"x": 0, "y": 0, "width": metrics["width"], "height": min(metrics["height"], 6000),
                                "scale": 1})
        data = self.send("Page.captureScreenshot", **params)["data"]
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(base64.b64decode(data))
        return path

    def close(self) -> None:
        self.ws.close()


class Chromium:
    """A headless Chromium with a fresh profile, stopped (with its profile deleted) on exit."""

    def __init__(self, executable: str | None = None):
        self.executable = executable or chromium_path()
        if self.executable is None:
            raise BrowserError(f"no Chromium here: {INSTALL}")
        self.profile = tempfile.mkdtemp(prefix="streamlab-chromium-")
        self.proc: subprocess.Popen | None = None
        self.port = 0
        self.pages: list[Page] = []

    def __enter__(self) -> Chromium:
        self.proc = subprocess.Popen(
            [self.executable, *FLAGS, f"--user-data-dir={self.profile}", "--remote-debugging-port=0",
             "--remote-debugging-address=127.0.0.1", "about:blank"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
        active = Path(self.profile) / "DevToolsActivePort"
        deadline = time.monotonic() + 60
        while not (active.exists() and active.read_text().strip()):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise BrowserError(f"Chromium did not start (exit code {self.proc.poll()})")
            time.sleep(0.1)
        self.port = int(active.read_text().split()[0])
        return self

    def new_page(self) -> Page:
        request = Request(f"http://127.0.0.1:{self.port}/json/new?about:blank", method="PUT")  # Chromium 111+: PUT
        with urlopen(request, timeout=30) as answer:
            target = json.loads(answer.read())
        page = Page(target["webSocketDebuggerUrl"])
        self.pages.append(page)
        return page

    def __exit__(self, *exc) -> None:
        for page in self.pages:
            try:
                page.close()
            except Exception:  # noqa: BLE001 - the browser is going away anyway
                pass
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, 15)
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, 9)
                self.proc.wait(timeout=20)
        shutil.rmtree(self.profile, ignore_errors=True)
