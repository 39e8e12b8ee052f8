"""The two-tier view in a real chromium at 1024x768: lesson 13's scenario, blocks spill and come back.

The player draws the device pool with the host tier under it; the page's line slider moves it."""

from __future__ import annotations

import pytest

from tests.e2e.harness import open_page, wait_idle

pytestmark = pytest.mark.e2e


def test_two_tier_view_shows_spill_and_reload(page, streamlit_servers, tmp_path) -> None:  # type: ignore[no-untyped-def]
    page.set_viewport_size({"width": 1024, "height": 768})
    open_page(page, streamlit_servers("app_pages/second_tier.py").url)
    player = page.frame_locator("iframe[title*=lab_player]").first
    host = player.locator("#host")
    host.get_by_text("Loaded back").wait_for(timeout=60_000)
    assert player.locator("[data-testid=prefixlab-player][data-mode=view] #pool .tile").count() > 2  # the device pool
    text = host.inner_text()
    assert "Loaded back: r3 got 12 tokens from the host tier" in text
    assert "Host tier (CPU), 10 blocks" in text
    assert page.evaluate("() => document.scrollingElement.scrollWidth") <= 1024  # nothing runs off the side
    page.screenshot(path=str(tmp_path / "second-tier.png"))  # a test leaves the docs' pictures alone
    # Back to the second line: r1 has run, its three full blocks just spilled into the tier (outlined).
    thumb = page.get_by_role("slider")
    thumb.focus()
    page.keyboard.press("Home")
    page.keyboard.press("ArrowRight")
    host.get_by_text("Spilled to the host tier: 3 block").wait_for(timeout=30_000)
    wait_idle(page)
    assert "Host tier (CPU), 3 blocks" in host.inner_text()
    assert host.locator(".hblock.stored").count() == 3
