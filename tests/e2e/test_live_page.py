"""The Live page in a real chromium, attached to PrefixLab's own server (``prefixlab serve``).

Requests arrive through the HTTP API (the real ``openai`` client, not the page); the page must show
the stream: connected, cached blocks counted, the prompt's text drawn in the tree; then the server
restarts and the page says so and reconnects by itself.
"""

from __future__ import annotations

import re

import pytest

from teaching.live.client import send_chat
from tests.e2e.harness import open_page, wait_idle
from tests.live.serve_process import class_server  # noqa: F401  (a fixture)

pytestmark = [pytest.mark.e2e, pytest.mark.slow]  # the real default model answers

SYSTEM = "You are the class tutor. Explain caching with one short example about bread and bakeries."


def body(page) -> str:  # type: ignore[no-untyped-def]
    return page.locator("body").inner_text()


def wait_for_text(page, text: str, timeout_ms: int = 60_000) -> None:  # type: ignore[no-untyped-def]
    page.wait_for_function("t => document.body.innerText.includes(t)", arg=text, timeout=timeout_ms)


def metric(page, label: str) -> str:  # type: ignore[no-untyped-def]
    return page.locator("[data-testid=stMetric]", has_text=label).locator("[data-testid=stMetricValue]").inner_text()


def test_live_page_shows_requests_sent_through_the_http_api(page, app_url, class_server) -> None:  # type: ignore[no-untyped-def]  # noqa: F811
    open_page(page, app_url, timeout_ms=180_000)
    page.locator("a[data-testid=stSidebarNavLink]", has_text="Live").click()
    page.get_by_role("heading", name="Live").wait_for(timeout=120_000)
    wait_idle(page, timeout_ms=120_000)
    servers = page.locator("[data-testid=stTextArea]", has_text="Servers").locator("textarea")
    servers.fill(f"class {class_server.events} {class_server.replay} {class_server.http}")
    servers.press("Control+Enter")
    page.get_by_role("button", name="Connect", exact=True).click()
    wait_for_text(page, "connected to")
    assert metric(page, "cached blocks") == "0"

    # two students' requests through the HTTP API, sharing the system prompt
    first = send_chat(class_server.http, [{"role": "system", "content": SYSTEM}, {"role": "user", "content": "Hi!"}],
                      max_tokens=4)
    second = send_chat(class_server.http, [{"role": "system", "content": SYSTEM},
                                           {"role": "user", "content": "And rye?"}], max_tokens=4)
    assert first.cached_tokens == 0 and (second.cached_tokens or 0) > 0
    page.wait_for_function(
        """() => [...document.querySelectorAll('[data-testid=stMetric]')].some(m =>
             m.innerText.includes('cached blocks') && parseInt(m.querySelector('[data-testid=stMetricValue]').innerText) > 0)""",
        timeout=30_000)
    cached = int(metric(page, "cached blocks"))
    assert cached >= (second.cached_tokens or 0) // 16
    # the tree draws the prompt's tokens, decoded (Plotly repaints a moment after the numbers)
    page.wait_for_function("""() => (document.querySelector('.js-plotly-plot')?.textContent || '')
                                      .includes('<|im_start|>sys')""", timeout=30_000)
    page.wait_for_function("() => !document.body.innerText.includes('hit rate\\n–')", timeout=30_000)

    # the server restarts: the page says so, reconnects by itself, and starts the picture over
    class_server.stop()
    wait_for_text(page, "connection lost; reconnecting")
    wait_for_text(page, "waiting for the server")
    class_server.start()
    page.wait_for_function("() => (document.querySelector('[data-testid=live-status]')?.innerText || '')"
                           ".includes('connected') && !document.body.innerText.includes('waiting for the server')",
                           timeout=60_000)
    page.wait_for_function(
        """() => [...document.querySelectorAll('[data-testid=stMetric]')].some(m =>
             m.innerText.includes('cached blocks') && m.querySelector('[data-testid=stMetricValue]').innerText === '0')""",
        timeout=30_000)
    assert "Traceback" not in body(page)


def test_playground_sends_to_the_class_server(page, app_url, class_server) -> None:  # type: ignore[no-untyped-def]  # noqa: F811
    open_page(page, app_url, timeout_ms=180_000)
    page.locator("a[data-testid=stSidebarNavLink]", has_text="Playground").click()
    page.get_by_role("heading", name="Playground").wait_for(timeout=180_000)
    wait_idle(page, timeout_ms=180_000)
    page.locator("[data-testid=stCheckbox]", has_text="Send to the class server").click()
    wait_idle(page)
    url = page.locator("[data-testid=stTextInput]", has_text="Class server URL").locator("input")
    url.fill(class_server.http)
    url.press("Enter")
    wait_idle(page)
    for _ in range(2):  # the preset's message twice: the second time the server's cache serves the prompt
        page.get_by_role("button", name="Send to the class server", exact=True).click()
        wait_idle(page, timeout_ms=120_000)
    wait_for_text(page, "TTFT")
    lines = [line for line in body(page).splitlines() if line.startswith("TTFT")]
    assert len(lines) == 2
    assert " 0 cached" not in lines[0]  # the newest answer first: its prompt was served from the cache
    assert " 0 cached" in lines[1]


def test_live_page_replays_a_shipped_vllm_recording(page, app_url) -> None:  # type: ignore[no-untyped-def]
    from tests.live.conftest import recording_pairs

    pairs = recording_pairs()
    if not pairs:
        pytest.skip("the vLLM recordings are not there")
    recording = next(path for path, _ in pairs if "evict" in path.name)
    open_page(page, app_url, timeout_ms=180_000)
    page.locator("a[data-testid=stSidebarNavLink]", has_text="Live").click()
    page.get_by_role("heading", name="Live").wait_for(timeout=120_000)
    page.get_by_text("a recording", exact=True).click()
    wait_idle(page, timeout_ms=120_000)
    page.locator("[data-testid=stFileUploader] input[type=file]").set_input_files(str(recording))
    wait_for_text(page, "batches from")
    wait_idle(page, timeout_ms=120_000)
    assert "showing the cache after batch 17" in body(page)
    page.locator("[data-testid=stSlider]").first.wait_for(timeout=30_000)  # drawn after the text, in the same run
    assert page.locator("[data-testid=stSlider]").count() == 1
    tree_text = page.locator(".js-plotly-plot").first.text_content() or ""
    assert re.search(r"…?[A-Za-z]{4,}…? [#·]", tree_text), tree_text  # a run's words, decoded by the model's tokenizer
