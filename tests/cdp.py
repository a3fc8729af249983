"""Headless Chromium driven through the DevTools protocol over a pipe
(``--remote-debugging-pipe``: commands on fd 3, replies on fd 4, each a JSON message ended by
a NUL byte), so that a test can wait for a page's JavaScript to finish, click, and take a
screenshot.  No WebSocket library and no browser driver are needed."""

from __future__ import annotations

import base64
import json
import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

import pytest


def chromium() -> str:
    binary = shutil.which("chromium")
    if binary is None:
        if os.environ.get("CI") == "true":
            pytest.fail("chromium is not installed; scripts/system_deps.sh installs it")
        pytest.skip("chromium is not installed (bash scripts/system_deps.sh installs it)")
    return binary


class Browser:
    def __init__(self, binary: str, width: int = 1600, height: int = 900) -> None:
        self._profile = tempfile.TemporaryDirectory()
        to_chrome_r, self._to_chrome = os.pipe()
        self._from_chrome, from_chrome_w = os.pipe()

        def wire() -> None:  # in the child: its fd 3 reads our commands, fd 4 writes replies
            # (through fds out of the way first: a pipe's own end may be fd 3 or 4)
            os.dup2(to_chrome_r, 203)
            os.dup2(from_chrome_w, 204)
            os.dup2(203, 3)
            os.dup2(204, 4)

        self._proc = subprocess.Popen(
            [
                binary,
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--no-first-run",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
                "--remote-debugging-pipe",
                f"--user-data-dir={self._profile.name}",
                f"--window-size={width},{height}",
                "about:blank",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            pass_fds=(3, 4),  # kept open after wire()
            preexec_fn=wire,  # noqa: PLW1509 - only dup2, before exec
            start_new_session=True,
        )
        os.close(to_chrome_r)
        os.close(from_chrome_w)
        self._buffer = b""
        self._next = 0
        target = self.call("Target.createTarget", url="about:blank")["targetId"]
        self._session = self.call("Target.attachToTarget", targetId=target, flatten=True)[
            "sessionId"
        ]
        self.call("Page.enable", session=True)
        self.resize(width, height)

    def resize(self, width: int, height: int) -> None:
        self.width, self.height = width, height
        self.call(
            "Emulation.setDeviceMetricsOverride",
            session=True,
            width=width,
            height=height,
            deviceScaleFactor=1,
            mobile=False,
        )

    def call(self, method: str, session: bool = False, **params: Any) -> dict[str, Any]:
        self._next += 1
        message: dict[str, Any] = {"id": self._next, "method": method, "params": params}
        if session:
            message["sessionId"] = self._session
        os.write(self._to_chrome, json.dumps(message).encode() + b"\0")
        deadline = time.monotonic() + 60
        while True:  # events arrive in between; the reply has our id
            while b"\0" not in self._buffer:
                if time.monotonic() > deadline:
                    raise TimeoutError(f"no reply to {method} in 60 s")
                chunk = os.read(self._from_chrome, 1 << 16)
                if not chunk:
                    raise RuntimeError(f"chromium closed the pipe during {method}")
                self._buffer += chunk
            raw, self._buffer = self._buffer.split(b"\0", 1)
            reply = json.loads(raw)
            if reply.get("id") == self._next:
                if "error" in reply:
                    raise RuntimeError(f"{method}: {reply['error']}")
                return dict(reply.get("result", {}))

    def go(self, url: str) -> None:
        self.call("Page.navigate", session=True, url=url)

    def js(self, expression: str) -> Any:
        result = self.call(
            "Runtime.evaluate",
            session=True,
            expression=expression,
            returnByValue=True,
            awaitPromise=True,
        )
        if "exceptionDetails" in result:
            raise RuntimeError(f"{expression}: {result['exceptionDetails']}")
        return result["result"].get("value")

    def wait_for(self, expression: str, timeout: float = 60, what: str = "") -> Any:
        """Poll ``expression`` until it is truthy; its value."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                value = self.js(expression)
            except RuntimeError:  # the page is still loading (no body yet)
                value = None
            if value:
                return value
            if time.monotonic() > deadline:
                text = self.js("document.body ? document.body.innerText.slice(0, 1500) : ''")
                raise TimeoutError(
                    f"waited {timeout:.0f} s for {what or expression}; page:\n{text}"
                )
            time.sleep(0.25)

    def screenshot(self, path: Path) -> None:
        data = self.call("Page.captureScreenshot", session=True, format="png")["data"]
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(base64.b64decode(data))

    def close(self) -> None:
        try:
            self.call("Browser.close")
        except (RuntimeError, TimeoutError, OSError):
            pass
        try:
            self._proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            os.killpg(self._proc.pid, 9)
            self._proc.wait(timeout=10)
        os.close(self._to_chrome)
        os.close(self._from_chrome)
        self._profile.cleanup()

    def __enter__(self) -> Browser:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
