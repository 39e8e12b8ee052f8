"""Start a Streamlit app and drive it in Debian's chromium: shared by the e2e tests and scripts/.

Plain functions, no pytest, so ``scripts/screenshots.py`` can use them too. The browser is
the system's ``/usr/bin/chromium`` (``playwright install`` cannot download here).
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CHROMIUM = os.environ.get("PREFIXLAB_CHROMIUM", "/usr/bin/chromium")  # Debian's chromium
CHROMIUM_ARGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
]
VIEWPORT = {"width": 1280, "height": 800}
#: A classroom projector's screen (projector mode's tests).
PROJECTOR_SCREEN = {"width": 1024, "height": 768}
IDLE_APP = "[data-testid=stApp][data-test-script-state=notRunning]"
NAV_LINKS = "a[data-testid=stSidebarNavLink], a[data-testid=stTopNavLink], a[data-testid=stTopNavDropdownLink]"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@dataclass
class StreamlitServer:
    """One ``streamlit run`` child process serving ``script`` on ``url``."""

    script: str
    port: int
    process: subprocess.Popen
    log_path: Path
    url: str = field(init=False)

    def __post_init__(self) -> None:
        self.url = f"http://127.0.0.1:{self.port}"

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def stop(self) -> None:
        """Terminate the server we started (by its own pid), then wait for it."""
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=5)


def start_streamlit(script: str = "app.py", *, timeout: float = 90.0, log_dir: Path | None = None) -> StreamlitServer:
    """Run ``python -m streamlit run script`` from the repo root and wait for ``/_stcore/health``."""
    if not (ROOT / script).exists():
        raise FileNotFoundError(f"{script} does not exist in {ROOT}.")
    port = free_port()
    log_dir = log_dir or Path(os.environ.get("TMPDIR", "/tmp"))
    log_path = log_dir / f"streamlit-{Path(script).stem}-{port}.log"
    log_file = open(log_path, "w")
    process = subprocess.Popen(
        [
            sys.executable, "-m", "streamlit", "run", script,
            "--server.port", str(port), "--server.address", "127.0.0.1", "--server.headless", "true",
            "--server.fileWatcherType", "none", "--browser.gatherUsageStats", "false",
        ],
        cwd=ROOT, stdout=log_file, stderr=subprocess.STDOUT,
    )
    server = StreamlitServer(script, port, process, log_path)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"streamlit exited with code {process.returncode}:\n{server.log()}")
        try:
            with urllib.request.urlopen(f"{server.url}/_stcore/health", timeout=2) as response:
                if response.status == 200:
                    return server
        except (urllib.error.URLError, ConnectionError, TimeoutError):
            pass
        time.sleep(0.3)
    server.stop()
    raise TimeoutError(f"streamlit did not become healthy in {timeout:.0f}s:\n{server.log()}")


def launch_chromium(playwright):  # type: ignore[no-untyped-def]
    """Debian's chromium, headless, with the flags this sandbox needs."""
    return playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)


def wait_idle(page, timeout_ms: int = 60_000, settle_ms: int = 600) -> None:  # type: ignore[no-untyped-def]
    """Wait until the script finished running, then give the frontend a moment to paint."""
    page.wait_for_selector(IDLE_APP, timeout=timeout_ms)
    page.wait_for_timeout(settle_ms)
    page.wait_for_selector(IDLE_APP, timeout=timeout_ms)


def exception_texts(page) -> list[str]:  # type: ignore[no-untyped-def]
    """Text of every ``st.exception`` box (tracebacks) on the page."""
    return [e.inner_text() for e in page.query_selector_all("[data-testid=stException]")]


def track_page_errors(page) -> list[str]:  # type: ignore[no-untyped-def]
    """Record every uncaught JavaScript error of ``page`` (``open_page`` then fails on them)."""
    errors: list[str] = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    page.prefixlab_page_errors = errors
    return errors


def assert_no_exceptions(page) -> None:  # type: ignore[no-untyped-def]
    """Fail on an ``stException`` box, or on a page error recorded by :func:`track_page_errors`."""
    shown = exception_texts(page)
    assert not shown, f"Streamlit showed exceptions at {page.url}: {shown}"
    page_errors = getattr(page, "prefixlab_page_errors", [])
    assert not page_errors, f"JavaScript errors at {page.url}: {page_errors}"


def open_page(page, url: str, timeout_ms: int = 60_000) -> None:  # type: ignore[no-untyped-def]
    """Navigate to ``url``, wait until the Streamlit script is idle, fail on a shown exception."""
    page.goto(url, wait_until="domcontentloaded", timeout=timeout_ms)
    wait_idle(page, timeout_ms)
    assert_no_exceptions(page)


def open_and_see_at_once(page, url: str, content: str, text: str) -> None:  # type: ignore[no-untyped-def]
    """Open ``url`` in a fresh tab and check ``content`` (holding ``text``) is there as the script finishes.

    "As the script finishes" means: once the title is drawn and the script run is over, its output
    is already in the DOM, give or take one React render. The wait for that moment is generous (a
    loaded machine runs the script slowly, and the app reads idle before its first run starts); the
    wait after it is short, and no chart bundle may be requested at all: a Plotly chart would fetch
    and parse Plotly.js (~4.7 MB) only after the script had finished.
    """
    chart_bundles: list[str] = []
    page.on("request", lambda r: chart_bundles.append(r.url) if "Plotly" in r.url else None)
    page.goto(url, wait_until="domcontentloaded")
    page.wait_for_function(
        "idle => !!document.querySelector('h1') && !!document.querySelector(idle)", arg=IDLE_APP, timeout=60_000
    )
    page.wait_for_function(
        "([sel, text]) => { const c = document.querySelector(sel); return !!c && c.innerText.includes(text); }",
        arg=[content, text], timeout=5_000,
    )
    assert_no_exceptions(page)
    assert not chart_bundles, f"the page loaded a chart bundle: {chart_bundles}"


def nav_pages(page) -> list[tuple[str, str]]:  # type: ignore[no-untyped-def]
    """``(label, href)`` of every page in the app's navigation (sidebar or top bar)."""
    more = page.query_selector("[data-testid=stSidebarNavViewButton]")
    if more is not None and more.is_visible():
        more.click()
        page.wait_for_timeout(300)
    links = []
    for link in page.query_selector_all(NAV_LINKS):
        href = link.get_attribute("href")
        # The label without its icon (material icons are spans whose text is the icon's name).
        label = link.evaluate(
            "a => { const c = a.cloneNode(true); c.querySelectorAll('[data-testid=stIconMaterial]')"
            ".forEach(i => i.remove()); return c.textContent.trim(); }"
        )
        if href and (label, href) not in links:
            links.append((label, href))
    return links
