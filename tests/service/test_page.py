"""The live page in a real browser: Debian's headless Chromium driven by Playwright (no browser download)."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from tests.debian import need

ARTEFACTS = Path(__file__).resolve().parents[2] / "test-artefacts"
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync"]


def test_start_watch_and_stop_from_the_page(live_server) -> None:
    sync_api = pytest.importorskip("playwright.sync_api", reason="needs playwright (test extra)")
    chromium = need("chromium", "chromium")
    errors: list[str] = []
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium, args=FLAGS, headless=True)
        try:
            page = browser.new_page()
            page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
            page.on("pageerror", lambda e: errors.append(str(e)))
            page.goto(live_server.url + "/")
            page.wait_for_selector("#pipeline option", state="attached")
            page.select_option("#pipeline", "scene/1")
            page.fill("#source", "testsrc://ticker?width=640&height=360")
            page.fill("#parameters", '{"rate": 20}')
            page.click("#start-button")
            row = page.locator("#instances tr[data-state=RUNNING]")
            row.wait_for(timeout=30_000)
            img = page.locator("img.live").first
            img.wait_for(timeout=10_000)
            page.wait_for_function("document.querySelector('img.live') && "
                                   "document.querySelector('img.live').naturalWidth > 0", timeout=15_000)
            first = img.screenshot()
            time.sleep(0.8)
            second = img.screenshot()
            assert first != second, "the live image did not change"
            assert img.evaluate("i => i.naturalWidth") == 640
            # the row is refreshed from the status every second: frames grow, FPS shows the paced rate
            frames = [int(row.locator("td.frames").inner_text())]
            deadline = time.monotonic() + 10
            while frames[-1] <= frames[0] and time.monotonic() < deadline:
                time.sleep(0.5)
                frames.append(int(row.locator("td.frames").inner_text()))
            assert frames[-1] > frames[0], f"the instance row did not update: {frames}"
            fps = float(row.locator("td.fps").inner_text())
            assert 14 < fps < 26, fps  # "rate": 20
            ARTEFACTS.mkdir(exist_ok=True)
            page.screenshot(path=str(ARTEFACTS / "live-page.png"), full_page=True)
            row.locator("button.stop").click()
            page.locator("#instances tr[data-state=ABORTED]").wait_for(timeout=30_000)
            page.wait_for_function("document.querySelectorAll('img.live').length === 0", timeout=10_000)
        finally:
            browser.close()
    assert not errors, errors
    assert live_server.manager.all()[0].state == "ABORTED"
