"""Real-browser fixtures: a Streamlit server per script, Debian's chromium, and an error check.

Use ``app_url`` for the whole app (``app.py``); to test one page file on its own, parametrize
it indirectly: ``@pytest.mark.parametrize("app_url", ["app_pages/hash_chain.py"], indirect=True)``.
Every ``page`` fails its test on a JavaScript page error or an ``stException`` element.
Navigate with ``tests.e2e.harness.open_page(page, url)``: it waits for the script to finish
(``[data-testid=stApp][data-test-script-state=notRunning]`` plus a settle) and fails at once
on either kind of error.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.e2e.harness import (
    CHROMIUM,
    PROJECTOR_SCREEN,
    ROOT,
    VIEWPORT,
    StreamlitServer,
    exception_texts,
    launch_chromium,
    start_streamlit,
    track_page_errors,
)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Every test in this folder drives a real browser: mark it e2e."""
    here = Path(__file__).parent
    for item in items:
        if item.path.is_relative_to(here):
            item.add_marker(pytest.mark.e2e)


@pytest.fixture(scope="session")
def streamlit_servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Callable[[str], StreamlitServer]]:
    """``start(script)``: one server per script for the whole session, stopped at teardown."""
    servers: dict[str, StreamlitServer] = {}
    log_dir = tmp_path_factory.mktemp("streamlit-logs")

    def start(script: str) -> StreamlitServer:
        if not (ROOT / script).exists():
            pytest.skip(f"{script} does not exist yet")
        if script not in servers:
            servers[script] = start_streamlit(script, log_dir=log_dir)
        return servers[script]

    yield start
    for server in servers.values():
        server.stop()


@pytest.fixture(scope="session")
def app_url(request: pytest.FixtureRequest, streamlit_servers: Callable[[str], StreamlitServer]) -> str:
    """Base URL of a running ``streamlit run <script>`` (default ``app.py``)."""
    script = getattr(request, "param", "app.py")
    return streamlit_servers(script).url


@pytest.fixture(scope="session")
def browser() -> Iterator[object]:
    if not Path(CHROMIUM).exists():
        pytest.skip(f"{CHROMIUM} is missing: install Debian's chromium (apt-get install chromium) for e2e tests")
    sync_api = pytest.importorskip("playwright.sync_api", reason="the playwright Python package is not installed")
    with sync_api.sync_playwright() as playwright:
        browser = launch_chromium(playwright)
        yield browser
        browser.close()


@pytest.fixture
def page(browser) -> Iterator[object]:  # type: ignore[no-untyped-def]
    """A fresh 1280x800 tab; the test fails on any page error or Streamlit exception box."""
    context = browser.new_context(viewport=VIEWPORT)
    tab = context.new_page()
    page_errors = track_page_errors(tab)
    yield tab
    shown = exception_texts(tab) if not tab.is_closed() else []
    context.close()
    assert not page_errors, f"JavaScript errors on the page: {page_errors}"
    assert not shown, f"Streamlit showed exceptions: {shown}"


@pytest.fixture
def screen(browser):  # type: ignore[no-untyped-def]
    """A tab the size of a classroom projector's screen."""
    context = browser.new_context(viewport=PROJECTOR_SCREEN)
    tab = context.new_page()
    yield tab
    context.close()
