"""The live dashboard at ``/``, end to end in headless Chromium (Playwright, Debian's chromium).

A real ``asrserve serve`` process; the page polls ``/v1/dashboard/stats`` and must draw what
a few concurrent transcriptions did to the scheduler, and its "try it" form must show a
transcript with segment timestamps, or the API's error.
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import pytest
from playwright.sync_api import Browser, ConsoleMessage, FilePayload, Page, sync_playwright

from asrserve.api.dashboard.routes import RECENT_JOBS, percentile
from asrserve.bench.corpus import Clip
from asrserve.engine.layout import cpu_layout, usable_cores
from tests.support.servers import Server

pytestmark = pytest.mark.slow

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
TIMEOUT = httpx.Timeout(120.0, connect=10.0)
WAIT_MS = 30_000
STAMP = re.compile(r"\d{2}:\d{2}\.\d{2} – \d{2}:\d{2}\.\d{2}")

needs_chromium = pytest.mark.skipif(
    not CHROMIUM.exists(), reason="no /usr/bin/chromium (scripts/system-deps.sh installs it)"
)


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    with sync_playwright() as pw:
        chromium = pw.chromium.launch(
            executable_path=str(CHROMIUM), headless=True, args=CHROMIUM_ARGS
        )
        yield chromium
        chromium.close()


class Console:
    """Every console error and uncaught page exception, as text."""

    def __init__(self, page: Page) -> None:
        self.errors: list[str] = []
        page.on("console", self._console)
        page.on("pageerror", lambda exc: self.errors.append(f"pageerror: {exc}"))

    def _console(self, message: ConsoleMessage) -> None:
        if message.type == "error":
            self.errors.append(f"console: {message.text}")


def _short_clips(corpus: list[Clip], n: int) -> list[Clip]:
    return sorted((c for c in corpus if c.duration <= 30), key=lambda c: c.duration)[:n]


def _transcribe(url: str, clip: Clip) -> dict[str, Any]:
    with clip.path.open("rb") as f:
        response = httpx.post(
            f"{url}/v1/audio/transcriptions",
            files={"file": (clip.path.name, f)},
            data={"model": "whisper-1", "response_format": "json"},
            timeout=TIMEOUT,
        )
    response.raise_for_status()
    body: dict[str, Any] = response.json()
    return body


def _data(page: Page, selector: str, name: str) -> float:
    value = page.get_attribute(selector, f"data-{name}")
    assert value is not None, f"{selector} has no data-{name}"
    return float(value)


def test_percentile() -> None:
    assert percentile([], 50) is None
    assert percentile([2.0], 99) == 2.0
    assert percentile([1.0, 2.0, 3.0, 4.0], 50) == 2.5
    assert percentile([float(v) for v in range(1, 101)], 95) == pytest.approx(95.05)


def test_stats_and_assets(server: Server) -> None:
    with httpx.Client(base_url=server.url, timeout=TIMEOUT) as client:
        page = client.get("/")
        assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
        assert 'id="busy-chart"' in page.text
        for name, kind in (("app.js", "text/javascript"), ("app.css", "text/css")):
            asset = client.get(f"/dashboard/static/{name}")
            assert asset.status_code == 200 and asset.headers["content-type"].startswith(kind)
        missing = client.get("/dashboard/static/..%2Froutes.py")
        assert missing.status_code == 404 and "error" in missing.json()
        before, wall_before = time.monotonic(), time.time()
        stats = client.get("/v1/dashboard/stats").json()
        after, wall_after = time.monotonic(), time.time()
        listed = client.get("/v1/jobs", params={"limit": 100}).json()["data"]
        scheduler = client.get("/v1/scheduler").json()
    # the server's clocks (the same machine's), read while the request was answered
    assert before <= stats["now"] <= after and wall_before <= stats["time"] <= wall_after
    assert (stats["ready"], stats["model"]) == (True, "tiny.en")
    assert not [job for job in listed if job["status"] in ("queued", "running")], "not idle"
    # no layout flags: the auto layout of this machine's cores, shown as chosen
    assert scheduler["layout"] == cpu_layout("auto", "auto", usable_cores()).as_dict()
    sched = stats["scheduler"]
    for key in ("audio_seconds", "batch_sizes", "queued_items", "device_busy_seconds"):
        assert sched[key] == scheduler[key], key  # the scheduler's own view, idle between
    assert [row["id"] for row in stats["jobs"]] == [job["id"] for job in listed[:RECENT_JOBS]]
    succeeded = [job for job in listed if job["status"] == "succeeded"]
    assert stats["latency"]["count"] == len(succeeded)  # fewer than 100 jobs on this server
    assert stats["latency"]["window"] == len(listed)


@needs_chromium
def test_dashboard_live(server: Server, corpus: list[Clip], browser: Browser) -> None:
    page = browser.new_page(viewport={"width": 1280, "height": 1400})
    console = Console(page)
    try:
        page.goto(f"{server.url}/")
        page.wait_for_function("document.getElementById('status').textContent === 'ready'")
        page.wait_for_function("window.asrDashboard.polls >= 2", timeout=WAIT_MS)

        clips = _short_clips(corpus, 3)
        with ThreadPoolExecutor(len(clips)) as pool:
            results = list(pool.map(lambda c: _transcribe(server.url, c), clips))
        assert all(r["text"] for r in results)

        # The polls after the requests draw them: busy time, audio rate, batches, jobs.
        page.wait_for_function(
            """() => {
                const busy = document.getElementById('busy-chart').dataset;
                const rate = document.getElementById('throughput').dataset;
                return Number(busy.points) > 0 && Number(busy.max) > 0 && Number(rate.max) > 0
                    && Number(document.getElementById('batch-chart').dataset.bars) >= 1
                    && document.querySelectorAll('#jobs tr[data-status=succeeded]').length >= 3;
            }""",
            timeout=WAIT_MS,
        )
        assert page.locator("#batch-chart rect.bar").count() >= 1
        layout = cpu_layout("auto", "auto", usable_cores())
        assert page.inner_text("#layout") == f"{layout.replicas} × {layout.threads}"
        # the engine auto chose on the CPU, and why on hover
        assert page.inner_text("#engine") == "ctranslate2"
        reason = page.get_attribute("#engine", "title") or ""
        assert reason.startswith("auto: the CPU")
        assert page.locator("#queue .row").count() == 3
        assert re.search(r"\d", page.inner_text("#latency-p50"))
        names = {clip.path.name for clip in clips}
        assert names <= set(page.locator("#jobs tbody td").all_inner_texts())
        # Idle after the burst: the busy chart goes back to 0 %, drawn as a dip, not a gap.
        page.wait_for_function(
            """() => Object.values(window.asrDashboard.busy).every(
                (pts) => pts.length && pts[pts.length - 1].busy === 0)""",
            timeout=WAIT_MS,
        )
        assert console.errors == []

        # A running job shows how many of its windows are done (the long clip has five).
        long_clip = corpus[-1]
        with long_clip.path.open("rb") as audio:
            job = httpx.post(f"{server.url}/v1/jobs", files={"file": audio}, timeout=60).json()
        page.wait_for_function(
            """(id) => {
                const row = document.querySelector(`#jobs tr[data-id="${id}"]`);
                return row && row.dataset.status === 'running'
                    && row.cells[2].textContent.endsWith('/5');
            }""",
            arg=job["id"],
            timeout=WAIT_MS,
        )
        page.wait_for_selector(f'#jobs tr[data-id="{job["id"]}"][data-status=succeeded]')

        # Try it: upload through the form, the transcript comes back with timestamps.
        clip = clips[0]
        page.set_input_files("#try-file", str(clip.path))
        page.click("#try-submit")
        page.wait_for_selector("#try-result li", timeout=WAIT_MS)
        shown = page.inner_text("#try-result")
        assert STAMP.search(shown), shown
        words = {w for w in re.findall(r"[a-z]+", clip.text.lower()) if len(w) >= 4}
        found = {w for w in words if w in shown.lower()}
        assert len(found) >= len(words) / 2, (words, shown)
        assert page.is_hidden("#try-error")
        assert console.errors == []

        # An API error is shown in the page (and the browser logs the failed request).
        noise: FilePayload = {"name": "noise.wav", "mimeType": "audio/wav", "buffer": b"x" * 64}
        page.set_input_files("#try-file", files=[noise])
        page.click("#try-submit")
        page.wait_for_selector("#try-error:not([hidden])", timeout=WAIT_MS)
        assert "415" in page.inner_text("#try-error")
        assert page.inner_text("#try-result") == ""
        assert all("status of 415" in e for e in console.errors), console.errors
    finally:
        page.close()
