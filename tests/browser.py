"""Screenshots of a local page in headless Chromium, driven over the DevTools protocol (aiohttp's
websocket client: aiohttp comes with the 'view' extra, so no browser-automation package is needed).

``chromium --screenshot`` alone is not enough for a trame page: it shoots at the load event, before
the page's websocket has brought the first rendered image; here the shot waits for a condition.
"""
from __future__ import annotations

import asyncio
import base64
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
# what this machine's notes ask for (a closed network: no background connections, a fresh profile)
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync"]


async def _screenshot(url: str, ready_js: str, size: tuple[int, int], timeout: float, settle: float) -> bytes:
    import aiohttp

    with tempfile.TemporaryDirectory() as profile:
        proc = subprocess.Popen([CHROMIUM, *FLAGS, f"--user-data-dir={profile}", "--remote-debugging-port=0",
                                 f"--window-size={size[0]},{size[1]}", "about:blank"],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            deadline = time.monotonic() + timeout
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
                    counter = 0

                    async def call(method: str, **params) -> dict:
                        nonlocal counter
                        counter += 1
                        await ws.send_json({"id": counter, "method": method, "params": params})
                        while True:
                            msg = await asyncio.wait_for(ws.receive_json(), max(deadline - time.monotonic(), 0.1))
                            if msg.get("id") == counter:
                                if "error" in msg:
                                    raise RuntimeError(f"{method}: {msg['error']}")
                                return msg.get("result", {})

                    await call("Emulation.setDeviceMetricsOverride", width=size[0], height=size[1],
                               deviceScaleFactor=1, mobile=False)      # the page's size, not the window's
                    await call("Page.navigate", url=url)
                    while True:
                        r = await call("Runtime.evaluate", expression=ready_js, returnByValue=True)
                        if r.get("result", {}).get("value"):
                            break
                        if time.monotonic() > deadline:
                            raise TimeoutError(f"the page at {url} did not become ready in {timeout:g} s "
                                               f"(waited for: {ready_js})")
                        await asyncio.sleep(0.25)
                    await asyncio.sleep(settle)
                    shot = await call("Page.captureScreenshot", format="png")
                    return base64.b64decode(shot["data"])
        finally:
            proc.terminate()
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()


def screenshot(url: str, ready_js: str = "true", *, size: tuple[int, int] = (1280, 800), timeout: float = 40.0,
               settle: float = 1.0) -> bytes:
    """PNG bytes of ``url`` in headless Chromium, taken ``settle`` s after ``ready_js`` is true."""
    if CHROMIUM is None:
        raise RuntimeError("no chromium executable (apt-get install chromium)")
    return asyncio.run(_screenshot(url, ready_js, size, timeout, settle))
