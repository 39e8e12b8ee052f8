"""The Playground in a real chromium, through app.py: send a preset prompt, see text stream in."""

from __future__ import annotations

import pytest

from tests.e2e.harness import open_page, wait_idle

pytestmark = [pytest.mark.e2e, pytest.mark.slow]  # the real default model answers


def test_playground_sends_a_prompt_and_shows_the_answer(page, app_url) -> None:  # type: ignore[no-untyped-def]
    open_page(page, app_url, timeout_ms=180_000)
    page.locator("a[data-testid=stSidebarNavLink]", has_text="Playground").click()
    page.get_by_role("heading", name="Playground").wait_for(timeout=180_000)
    wait_idle(page, timeout_ms=180_000)
    box = page.locator("[data-testid=stNumberInput]", has_text="Max tokens").locator("input")
    box.fill("4")
    box.press("Enter")
    wait_idle(page)
    page.get_by_role("button", name="Send", exact=True).click()
    page.wait_for_function("() => document.body.innerText.includes('TTFT')", timeout=180_000)
    wait_idle(page, timeout_ms=180_000)
    body = page.locator("body").inner_text()
    assert "Model:" in body and "(no text)" not in body
    assert "0 cached" in body  # the first request computes everything
    page.locator(".js-plotly-plot").first.wait_for(timeout=60_000)  # the request's blocks (Plotly draws after the run)
    frame = page.frame_locator("iframe[title*=lab_player]").first  # the engine's pool: the player
    frame.locator("[data-testid=prefixlab-player][data-mode=engine] .tile").first.wait_for(timeout=30_000)
    assert "Event" in frame.locator("#card").inner_text()  # the latest event, described
    assert "req-0" in (page.locator(".js-plotly-plot").first.text_content() or "")
