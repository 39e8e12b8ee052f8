"""Hash chain and Why did it miss? in a real chromium: they render at once, animate and survive bad input.

Through app.py's navigation (``/hash_chain``, ``/why_miss``) once app.py exists; until then
each page file is served on its own.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from tests.e2e.harness import (
    ROOT,
    StreamlitServer,
    assert_no_exceptions,
    open_and_see_at_once,
    open_page,
    track_page_errors,
    wait_idle,
)

pytestmark = pytest.mark.e2e


def url_of(streamlit_servers: Callable[[str], StreamlitServer], name: str) -> str:
    if (ROOT / "app.py").exists():
        return f"{streamlit_servers('app.py').url}/{name}"
    return streamlit_servers(f"app_pages/{name}.py").url


def wait_for_text(page, text: str, timeout_ms: int = 30_000) -> None:  # type: ignore[no-untyped-def]
    page.wait_for_function("t => document.body.innerText.includes(t)", arg=text, timeout=timeout_ms)
    wait_idle(page)


def test_hash_chain_shows_at_once_and_plays(browser, streamlit_servers) -> None:  # type: ignore[no-untyped-def]
    """At 1024x768, cold: the chain is in the same render as the title, with no chart bundle to wait for.

    It used to be a Plotly figure: the browser fetched and parsed Plotly.js after the script
    had finished, so the chain stayed blank for 1-2 s. Now it is the page's own HTML.
    """
    context = browser.new_context(viewport={"width": 1024, "height": 768})
    page = context.new_page()
    track_page_errors(page)
    try:
        open_and_see_at_once(page, url_of(streamlit_servers, "hash_chain"), ".pl-chain", "✓ hit: block #1")
        assert "Hash chain" in page.locator("h1").first.inner_text()
        text = page.locator(".pl-chain").inner_text()
        assert "block 0" in text and "never hashed" in text and "✗ miss" in text

        # One set of step controls, the chain's own, played in the browser; no server-side slider.
        assert page.locator("[data-testid=stSlider]").count() == 0
        step = "() => getComputedStyle(document.querySelector('.pl-chain .hc-body')).getPropertyValue('--step').trim()"
        cover = "() => +getComputedStyle(document.querySelectorAll('.pl-chain .hc-pending')[4]).opacity"
        assert page.evaluate(step) == "5" and page.evaluate(cover) == 0
        page.locator(".pl-chain label[for=hc-s0]").click()
        page.wait_for_function(f"() => ({cover})() === 1", timeout=5_000)  # block 4 of r2: not hashed yet
        assert page.locator(".pl-chain .hc-f").nth(0).evaluate("e => +getComputedStyle(e).opacity") == 1
        page.locator(".pl-chain label[for=hc-play]").click()
        seen = set()
        for _ in range(60):
            seen.add(page.evaluate(step))
            if "5" in seen:
                break
            page.wait_for_timeout(150)
        assert {"1", "2", "3", "4", "5"} <= seen, f"Play did not step through the blocks: {sorted(seen)}"
        page.wait_for_function(f"() => ({cover})() === 0", timeout=5_000)
        formula = page.locator(".pl-chain .hc-f").nth(5)
        assert formula.evaluate("e => +getComputedStyle(e).opacity") == 1 and "block 4 = H(" in formula.inner_text()
    finally:
        context.close()


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


def test_why_miss_verdict_and_presets(browser, streamlit_servers) -> None:  # type: ignore[no-untyped-def]
    """Both requests' token blocks are in the first render (HTML, as on Hash chain), and the presets work."""
    context = browser.new_context(viewport={"width": 1024, "height": 768})
    page = context.new_page()
    track_page_errors(page)
    try:
        open_and_see_at_once(page, url_of(streamlit_servers, "why_miss"), ".pl-tokens", "block 0")
        wait_for_text(page, "r2 would hit 2 blocks (8 of its 17 tokens): block 2 differs at token 11")
        assert page.locator(".pl-tokens").count() == 2
        assert "no hash yet" in page.locator(".pl-tokens").nth(1).inner_text()
        assert page.locator(".pl-tokens").nth(1).locator(".tb-tok.marked").inner_text() == "cat"
        page.locator("[data-testid=stSelectbox]", has_text="Example").click()
        page.get_by_role("option", name="Same prompt, another cache salt").click()
        wait_for_text(page, "the cache salt differs ('alice' vs 'bob')")
        assert_no_exceptions(page)
    finally:
        context.close()
