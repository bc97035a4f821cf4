"""A small Chrome DevTools Protocol client over ``--remote-debugging-pipe`` (no websocket, no
extra package): headless Chromium reads commands on its file descriptor 3 and writes replies
and events on 4, each a JSON message ended by a NUL byte.  Enough for the explorer tests: open
a page at a window size, evaluate JavaScript in it, collect console errors and exceptions, take
a screenshot."""
from __future__ import annotations

import base64
import fcntl
import json
import os
import select
import subprocess
import tempfile
import time


class CDPError(RuntimeError):
    pass


class Browser:
    """One headless Chromium with one page (tab).  ``flags``: extra command-line flags (the
    book tests' offline flags)."""

    def __init__(self, chromium: str, flags: list[str], timeout: float = 120.0, start_timeout: float = 240.0):
        """Start Chromium and open its page; a start that does not answer within
        ``start_timeout`` seconds (a loaded machine) is killed and tried once more."""
        self.timeout = timeout
        for attempt in (1, 2):
            try:
                self._start(chromium, flags, start_timeout)
                return
            except (CDPError, OSError):
                self.close()
                if attempt == 2:
                    raise

    def _start(self, chromium: str, flags: list[str], start_timeout: float) -> None:
        self._profile = tempfile.TemporaryDirectory()
        cmd_r, self._cmd_w = os.pipe()     # we write commands; Chromium reads fd 3
        self._evt_r, evt_w = os.pipe()     # Chromium writes fd 4; we read
        flags = [f for f in flags if not f.startswith("--virtual-time-budget")]

        def fds():   # in the child, before exec: the pipe ends become fds 3 and 4 (via high copies,
            a = fcntl.fcntl(cmd_r, fcntl.F_DUPFD, 10)   # so neither overwrites the other)
            b = fcntl.fcntl(evt_w, fcntl.F_DUPFD, 10)
            os.dup2(a, 3)
            os.dup2(b, 4)

        # close_fds=False keeps the two (dup2 makes them inheritable); Python's own descriptors are
        # not inherited anyway (PEP 446)
        self.proc = subprocess.Popen([chromium, *flags, "--remote-debugging-pipe", f"--user-data-dir={self._profile.name}",
                                      "about:blank"], close_fds=False, preexec_fn=fds,
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        os.close(cmd_r)
        os.close(evt_w)
        self._buf = b""
        self._id = 0
        self.events: list[dict] = []
        self.errors: list[str] = []
        target = self.call("Target.createTarget", {"url": "about:blank"}, timeout=start_timeout)["targetId"]
        self.session = self.call("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
        for domain in ("Page", "Runtime", "Log"):
            self.send(f"{domain}.enable")

    # ------------------------------------------------------------------ protocol
    def _read(self, deadline: float) -> dict:
        while b"\0" not in self._buf:
            left = deadline - time.monotonic()
            if left <= 0:
                raise CDPError("no reply from Chromium in time")
            ready, _, _ = select.select([self._evt_r], [], [], left)
            if ready:
                chunk = os.read(self._evt_r, 1 << 20)
                if not chunk:
                    raise CDPError("Chromium closed its pipe")
                self._buf += chunk
        msg, self._buf = self._buf.split(b"\0", 1)
        return json.loads(msg)

    def _note(self, msg: dict) -> None:
        self.events.append(msg)
        method, p = msg.get("method"), msg.get("params", {})
        if method == "Runtime.consoleAPICalled" and p.get("type") in ("error", "assert"):
            self.errors.append(" ".join(str(a.get("value", a.get("description", ""))) for a in p.get("args", [])))
        elif method == "Runtime.exceptionThrown":
            d = p.get("exceptionDetails", {})
            self.errors.append("uncaught: " + str(d.get("exception", {}).get("description") or d.get("text")))
        elif method == "Log.entryAdded" and p.get("entry", {}).get("level") == "error":
            e = p["entry"]
            self.errors.append(f"{e.get('source')}: {e.get('text')} {e.get('url', '')}".strip())

    def call(self, method: str, params: dict | None = None, session: bool = False, timeout: float | None = None) -> dict:
        self._id += 1
        msg = {"id": self._id, "method": method, "params": params or {}}
        if session:
            msg["sessionId"] = self.session
        os.write(self._cmd_w, json.dumps(msg).encode() + b"\0")
        deadline = time.monotonic() + (timeout or self.timeout)
        while True:
            reply = self._read(deadline)
            if reply.get("id") == self._id:
                if "error" in reply:
                    raise CDPError(f"{method}: {reply['error']}")
                return reply.get("result", {})
            self._note(reply)

    def send(self, method: str, params: dict | None = None) -> dict:
        return self.call(method, params, session=True)

    def wait_event(self, method: str, timeout: float | None = None) -> dict:
        deadline = time.monotonic() + (timeout or self.timeout)
        while True:
            msg = self._read(deadline)
            self._note(msg)
            if msg.get("method") == method:
                return msg

    # ------------------------------------------------------------------ conveniences
    def open(self, url: str, width: int, height: int = 900, mobile: bool = False) -> None:
        self.send("Emulation.setDeviceMetricsOverride", {"width": width, "height": height, "deviceScaleFactor": 1,
                                                         "mobile": mobile})
        self.send("Page.navigate", {"url": url})
        self.wait_event("Page.loadEventFired")

    def eval(self, expression: str):
        """The value of a JavaScript expression in the page (awaited when it is a promise)."""
        r = self.send("Runtime.evaluate", {"expression": expression, "returnByValue": True, "awaitPromise": True})
        if "exceptionDetails" in r:
            raise CDPError(f"{expression[:80]}...: {r['exceptionDetails'].get('exception', {}).get('description')}")
        return r["result"].get("value")

    def wait_for(self, expression: str, timeout: float = 120.0):
        """Poll ``expression`` until it is truthy; its value."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            v = self.eval(expression)
            if v:
                return v
            time.sleep(0.1)
        raise CDPError(f"timed out waiting for {expression!r}")

    def screenshot(self, path, selector: str | None = None) -> None:
        """A PNG of the viewport; with ``selector``, the window is first made tall enough for
        that element and scrolled to it, so the picture shows all of it in its page."""
        if selector:
            q = f"document.querySelector({json.dumps(selector)})"
            width, height, mobile = self.eval(f"[document.documentElement.clientWidth, Math.ceil({q}.getBoundingClientRect().height),"
                                              " matchMedia('(pointer: coarse)').matches]")
            self.send("Emulation.setDeviceMetricsOverride", {"width": width, "height": min(height + 140, 12000),
                                                             "deviceScaleFactor": 1, "mobile": bool(mobile)})
            self.eval(f"(() => {{ {q}.scrollIntoView({{block: 'start'}}); window.scrollBy(0, -70); }})()")
            time.sleep(0.3)
        data = self.send("Page.captureScreenshot", {"format": "png"})["data"]
        with open(path, "wb") as fh:
            fh.write(base64.b64decode(data))

    def close(self) -> None:
        """Close the browser (ask, then kill the process this object started) and remove its profile."""
        proc = getattr(self, "proc", None)
        if proc is not None and proc.poll() is None:
            try:
                self.call("Browser.close", timeout=10)
            except (CDPError, OSError):
                pass
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        for fd in (getattr(self, "_cmd_w", None), getattr(self, "_evt_r", None)):
            if fd is not None:
                try:
                    os.close(fd)
                except OSError:
                    pass
        self._cmd_w = self._evt_r = self.proc = None
        if getattr(self, "_profile", None) is not None:
            self._profile.cleanup()
            self._profile = None
