"""The two-tier view in a real chromium at 1024x768: lesson 13's scenario, blocks spill and come back."""

from __future__ import annotations

import pytest

from tests.e2e.harness import open_page, wait_idle

pytestmark = pytest.mark.e2e


def test_two_tier_view_shows_spill_and_reload(page, streamlit_servers, tmp_path) -> None:  # type: ignore[no-untyped-def]
    page.set_viewport_size({"width": 1024, "height": 768})
    open_page(page, streamlit_servers("app_pages/second_tier.py").url)
    page.wait_for_function("() => document.body.innerText.includes('Loaded back')", timeout=60_000)
    body = page.inner_text("body")
    assert "Loaded back: r3 got 12 tokens from the host tier" in body
    assert "Host tier (CPU), 10 blocks" in body
    assert page.evaluate("() => document.scrollingElement.scrollWidth") <= 1024  # nothing runs off the side
    page.screenshot(path=str(tmp_path / "second-tier.png"))  # the docs' picture: scripts.screenshots
    # Back to the second line: r1 has run, its three full blocks just spilled into the tier.
    thumb = page.get_by_role("slider")
    thumb.focus()
    page.keyboard.press("Home")
    page.keyboard.press("ArrowRight")
    page.wait_for_function("() => document.body.innerText.includes('Spilled to the host tier: 3 block')", timeout=30_000)
    wait_idle(page)
    assert "Host tier (CPU), 3 blocks" in page.inner_text("body")
