"""A local page in headless Chromium, driven over the DevTools protocol (aiohttp's websocket client:
aiohttp comes with the 'view' extra, so no browser-automation package is needed).

``chromium --screenshot`` alone is not enough for a trame page: it shoots at the load event, before
the page's websocket has brought the first rendered image; :class:`Page` waits for conditions,
runs JavaScript (clicks, state changes) and takes screenshots.

    async with open_page("http://localhost:8080/", size=(1280, 800)) as page:
        await page.wait("document.querySelector('img') !== null")
        png = await page.screenshot()
"""
from __future__ import annotations

import asyncio
import base64
import contextlib
import os
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any, AsyncIterator

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
# what this machine's notes ask for (a closed network: no background connections, a fresh profile)
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync"]


class Page:
    """One Chromium tab over its DevTools websocket; every call fails after the page's deadline."""

    def __init__(self, ws, deadline: float) -> None:
        self._ws, self._deadline, self._id = ws, deadline, 0

    def _left(self) -> float:
        return max(self._deadline - time.monotonic(), 0.1)

    async def call(self, method: str, **params: Any) -> dict:
        self._id += 1
        await self._ws.send_json({"id": self._id, "method": method, "params": params})
        while True:
            msg = await asyncio.wait_for(self._ws.receive_json(), self._left())
            if msg.get("id") == self._id:
                if "error" in msg:
                    raise RuntimeError(f"{method}: {msg['error']}")
                return msg.get("result", {})

    async def eval(self, js: str) -> Any:
        """The value of a JavaScript expression in the page."""
        r = await self.call("Runtime.evaluate", expression=js, returnByValue=True)
        if "exceptionDetails" in r:
            raise RuntimeError(f"{js}: {r['exceptionDetails'].get('text')} {r.get('result', {}).get('description')}")
        return r.get("result", {}).get("value")

    async def wait(self, js: str, what: str = "") -> None:
        """Until the expression ``js`` is true (TimeoutError at the deadline, naming ``what``); an expression
        that throws (the page still loading) counts as false."""
        error = ""
        while True:
            try:
                if await self.eval(js):
                    return
            except RuntimeError as exc:
                error = f" (last error: {exc})"
            if time.monotonic() > self._deadline:
                raise TimeoutError(f"the page did not show {what or js} in time{error}")
            await asyncio.sleep(0.2)

    async def screenshot(self) -> bytes:
        return base64.b64decode((await self.call("Page.captureScreenshot", format="png"))["data"])


@contextlib.asynccontextmanager
async def open_page(url: str, *, size: tuple[int, int] = (1280, 800), timeout: float = 40.0) -> AsyncIterator[Page]:
    """``url`` in a fresh headless Chromium, the page ``size`` pixels; everything within ``timeout`` s."""
    import aiohttp

    if CHROMIUM is None:
        raise RuntimeError("no chromium executable (apt-get install chromium)")
    deadline = time.monotonic() + timeout
    # Chromium's helper processes (renderer, crashpad) may still write the profile after the browser
    # exits: they run in the browser's own session and are killed with it, and a file they leave
    # behind in the throwaway profile does not fail the test
    with tempfile.TemporaryDirectory(ignore_cleanup_errors=True) as profile:
        proc = subprocess.Popen([CHROMIUM, *FLAGS, f"--user-data-dir={profile}", "--remote-debugging-port=0",
                                 f"--window-size={size[0]},{size[1]}", "about:blank"],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
        try:
            port_file = Path(profile) / "DevToolsActivePort"
            while not (port_file.is_file() and len(port_file.read_text().split()) >= 2):
                if time.monotonic() > deadline or proc.poll() is not None:
                    raise TimeoutError(f"Chromium did not open its DevTools port (exit code {proc.poll()})")
                await asyncio.sleep(0.1)
            port = port_file.read_text().split()[0]
            async with aiohttp.ClientSession() as session:
                async with session.get(f"http://127.0.0.1:{port}/json/list") as r:
                    targets = await r.json()
                ws_url = next(t["webSocketDebuggerUrl"] for t in targets if t["type"] == "page")
                async with session.ws_connect(ws_url, max_msg_size=0) as ws:
                    page = Page(ws, deadline)
                    await page.call("Emulation.setDeviceMetricsOverride", width=size[0], height=size[1],
                                    deviceScaleFactor=1, mobile=False)    # the page's size, not the window's
                    await page.call("Page.navigate", url=url)
                    yield page
        finally:
            _stop(proc)


def _stop(proc: subprocess.Popen) -> None:
    """End the browser (SIGTERM, 10 s to exit), then kill what is left of its session (helpers)."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGTERM)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(10)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(5)
