"""Drive a real headless Chromium over the DevTools protocol on a pipe (no extra dependency).

Chromium's `--remote-debugging-pipe` reads NUL-terminated JSON commands on fd
3 and writes replies and events on fd 4.  `Page` collects console errors,
uncaught exceptions and log errors, and blocks every http(s)/ws(s) request the
page attempts (recording its URL), so a test can assert that a report works
offline and says nothing on the console.
"""

from __future__ import annotations

import base64
import json
import os
import queue
import shutil
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--proxy-server=http://127.0.0.1:9",
    "--proxy-bypass-list=<-loopback>",
    "--hide-scrollbars",
]
INSTALL = "apt-get update && apt-get install -y chromium"


def chromium_path() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser")


class Browser:
    """One Chromium process with a fresh profile, talking CDP over a pipe."""

    def __init__(self, profile: Path, timeout: float = 30.0):
        exe = chromium_path()
        if exe is None:
            raise RuntimeError(f"chromium is not installed; install it with `{INSTALL}`.")
        to_child_r, self._to_child = os.pipe()
        self._from_child, from_child_w = os.pipe()

        def wire() -> None:
            hi_r, hi_w = os.dup(to_child_r), os.dup(from_child_w)
            os.dup2(hi_r, 3)
            os.dup2(hi_w, 4)

        self.timeout = timeout
        self.proc = subprocess.Popen(
            [exe, *FLAGS, "--remote-debugging-pipe", f"--user-data-dir={profile}", "about:blank"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            preexec_fn=wire,
            pass_fds=(3, 4),
        )
        os.close(to_child_r)
        os.close(from_child_w)
        self._next = 0
        self._inbox: queue.Queue[dict[str, Any]] = queue.Queue()
        self.events: list[dict[str, Any]] = []
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        buf = b""
        while True:
            chunk = os.read(self._from_child, 1 << 16)
            if not chunk:
                return
            buf += chunk
            *messages, buf = buf.split(b"\0")
            for m in messages:
                self._inbox.put(json.loads(m))

    def send(self, method: str, params: dict[str, Any] | None = None, session: str | None = None) -> dict[str, Any]:
        """Send a command and wait for its reply, handling events that arrive meanwhile."""
        self._next += 1
        msg: dict[str, Any] = {"id": self._next, "method": method, "params": params or {}}
        if session:
            msg["sessionId"] = session
        os.write(self._to_child, json.dumps(msg).encode() + b"\0")
        deadline = time.monotonic() + self.timeout
        while True:
            reply = self._inbox.get(timeout=max(0.01, deadline - time.monotonic()))
            if reply.get("id") == self._next:
                if "error" in reply:
                    raise RuntimeError(f"{method} failed: {reply['error']}")
                return reply.get("result", {})
            self._event(reply)

    def _event(self, event: dict[str, Any]) -> None:
        self.events.append(event)
        if event.get("method") == "Fetch.requestPaused":
            params = {"requestId": event["params"]["requestId"], "errorReason": "BlockedByClient"}
            self._next += 1
            os.write(
                self._to_child,
                json.dumps(
                    {
                        "id": self._next,
                        "method": "Fetch.failRequest",
                        "params": params,
                        "sessionId": event.get("sessionId"),
                    }
                ).encode()
                + b"\0",
            )

    def wait_event(self, method: str, session: str) -> dict[str, Any]:
        deadline = time.monotonic() + self.timeout
        for e in self.events:
            if e.get("method") == method and e.get("sessionId") == session:
                return e
        while True:
            e = self._inbox.get(timeout=max(0.01, deadline - time.monotonic()))
            if "id" not in e:
                self._event(e)
                if e.get("method") == method and e.get("sessionId") == session:
                    return e

    def page(self, width: int = 1400, height: int = 1800) -> Page:
        target = self.send("Target.createTarget", {"url": "about:blank"})["targetId"]
        session = self.send("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
        return Page(self, session, width, height)

    def close(self) -> None:
        try:
            self.send("Browser.close")
        except Exception:
            pass
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
        os.close(self._to_child)


class Page:
    """A tab with network blocked and console problems recorded."""

    def __init__(self, browser: Browser, session: str, width: int, height: int):
        self.b, self.session = browser, session
        for method in ("Page.enable", "Runtime.enable", "Log.enable", "Network.enable"):
            self.cmd(method)
        self.cmd(
            "Network.emulateNetworkConditions",
            {"offline": True, "latency": 0, "downloadThroughput": -1, "uploadThroughput": -1},
        )
        patterns = [{"urlPattern": p} for p in ("http://*", "https://*", "ws://*", "wss://*")]
        self.cmd("Fetch.enable", {"patterns": patterns})
        self.cmd(
            "Emulation.setDeviceMetricsOverride",
            {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": False},
        )

    def cmd(self, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        return self.b.send(method, params, self.session)

    def goto(self, url: str) -> None:
        self.cmd("Page.navigate", {"url": url})
        self.b.wait_event("Page.loadEventFired", self.session)

    def eval(self, expression: str) -> Any:
        """Evaluate JS (awaiting promises) and return its JSON value; a thrown error fails loudly."""
        res = self.cmd("Runtime.evaluate", {"expression": expression, "returnByValue": True, "awaitPromise": True})
        if "exceptionDetails" in res:
            raise RuntimeError(f"page script failed: {res['exceptionDetails']}")
        return res["result"].get("value")

    def screenshot(self, path: Path) -> Path:
        data = self.cmd("Page.captureScreenshot", {"format": "png"})["data"]
        path.write_bytes(base64.b64decode(data))
        return path

    def _mine(self) -> list[dict[str, Any]]:
        return [e for e in self.b.events if e.get("sessionId") == self.session]

    def problems(self) -> list[str]:
        """Console errors, uncaught exceptions and error log entries, as readable lines."""
        out = []
        for e in self._mine():
            m, p = e.get("method"), e.get("params", {})
            if m == "Runtime.consoleAPICalled" and p.get("type") in ("error", "assert"):
                out.append(
                    "console."
                    + p["type"]
                    + ": "
                    + " ".join(str(a.get("value", a.get("description"))) for a in p.get("args", []))
                )
            elif m == "Runtime.exceptionThrown":
                d = p.get("exceptionDetails", {})
                out.append("exception: " + str(d.get("exception", {}).get("description") or d.get("text")))
            elif m == "Log.entryAdded" and p.get("entry", {}).get("level") == "error":
                out.append("log: " + p["entry"].get("text", ""))
        return out

    def blocked(self) -> list[str]:
        """URLs of network requests the page attempted (all were refused)."""
        return [e["params"]["request"]["url"] for e in self._mine() if e.get("method") == "Fetch.requestPaused"]
