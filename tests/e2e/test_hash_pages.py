"""Hash chain and Why did it miss? in a real chromium: they render, animate and survive bad input.

Through app.py's navigation (``/hash_chain``, ``/why_miss``) once app.py exists; until then
each page file is served on its own.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from tests.e2e.harness import ROOT, StreamlitServer, open_page, wait_idle

pytestmark = pytest.mark.e2e


def url_of(streamlit_servers: Callable[[str], StreamlitServer], name: str) -> str:
    if (ROOT / "app.py").exists():
        return f"{streamlit_servers('app.py').url}/{name}"
    return streamlit_servers(f"app_pages/{name}.py").url


def wait_for_text(page, text: str, timeout_ms: int = 30_000) -> None:  # type: ignore[no-untyped-def]
    page.wait_for_function("t => document.body.innerText.includes(t)", arg=text, timeout=timeout_ms)
    wait_idle(page)


def plot_text(page, index: int = 0) -> str:  # type: ignore[no-untyped-def]
    return page.locator(".js-plotly-plot").nth(index).text_content() or ""


def test_hash_chain_renders_and_plays(page, streamlit_servers) -> None:  # type: ignore[no-untyped-def]
    open_page(page, url_of(streamlit_servers, "hash_chain"))
    page.locator(".js-plotly-plot").first.wait_for()
    assert "Hash chain" in page.locator("h1").first.inner_text()
    text = plot_text(page)
    assert "block 0" in text and "✓ hit: block #1" in text and "never hashed" in text

    # One slider for one thing: the figure's own, played in the browser; no server-side slider beside it.
    assert page.locator("[data-testid=stSlider]").count() == 0
    assert page.locator(".js-plotly-plot .slider-container").count() == 1
    # Client-side animation: play starts from no block hashed and ends with the last block hashed.
    page.locator(".updatemenu-button", has_text="Play").first.click()
    page.wait_for_function(
        "() => document.querySelector('.js-plotly-plot').textContent.includes('Press ▶')", timeout=30_000
    )
    page.wait_for_function(
        "() => document.querySelector('.js-plotly-plot').textContent.includes('block 4 = H(')", timeout=30_000
    )


def test_hash_chain_edit_a_token(page, streamlit_servers) -> None:  # type: ignore[no-untyped-def]
    open_page(page, url_of(streamlit_servers, "hash_chain"))
    box = page.locator("[data-testid=stNumberInput]", has_text="Edit token at position").locator("input")
    box.fill("0")
    box.press("Enter")
    wait_for_text(page, "from block 0 on (5 of 5)")


def test_hash_chain_bad_token_ids_give_a_message(page, streamlit_servers) -> None:  # type: ignore[no-untyped-def]
    open_page(page, url_of(streamlit_servers, "hash_chain"))
    page.locator("[data-testid=stRadio]", has_text="Prompt as").get_by_text("token ids").click()
    wait_for_text(page, "r1: prompt (token ids)")
    area = page.locator("[data-testid=stTextArea]", has_text="r1: prompt").locator("textarea")
    area.fill("1 2 x 4")
    area.press("Control+Enter")
    wait_for_text(page, "Token 2 is 'x'")
    assert page.locator("[data-testid=stAlert]").count() >= 1


def test_why_miss_verdict_and_presets(page, streamlit_servers) -> None:  # type: ignore[no-untyped-def]
    open_page(page, url_of(streamlit_servers, "why_miss"))
    wait_for_text(page, "r2 would hit 2 blocks (8 of its 17 tokens): block 2 differs at token 11")
    assert page.locator(".js-plotly-plot").count() == 2
    assert "no hash yet" in plot_text(page, 1)
    page.locator("[data-testid=stSelectbox]", has_text="Example").click()
    page.get_by_role("option", name="Same prompt, another cache salt").click()
    wait_for_text(page, "the cache salt differs ('alice' vs 'bob')")
