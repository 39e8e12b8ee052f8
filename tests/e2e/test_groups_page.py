"""The KV cache groups page in a real chromium at 1024x768: per-group block tables, released blocks, a cut hit."""

from __future__ import annotations

import pytest

from tests.e2e.harness import open_page, wait_idle

pytestmark = pytest.mark.e2e



@pytest.mark.parametrize("app_url", ["app_pages/groups.py"], indirect=True)
def test_groups_page_draws_each_group(page, app_url, tmp_path) -> None:  # type: ignore[no-untyped-def]
    page.set_viewport_size({"width": 1024, "height": 768})
    open_page(page, app_url)
    player = page.frame_locator("iframe[title*=lab_player]").first  # the player draws the groups under the pool
    player.locator("#groups h4").first.wait_for(timeout=60_000)
    assert player.locator("[data-testid=prefixlab-player][data-mode=view] #pool .tile").count() > 2
    view = player.locator("#groups")
    text = view.inner_text()
    assert "Group 0 · sliding window of 8 tokens" in text and "Group 1 · full attention" in text
    # The window released r1's first blocks: the null block stands in its sliding-window table only.
    assert view.locator("h4[data-group='0'] + table .null").count() >= 3
    assert view.locator("h4[data-group='1'] + table .null").count() == 0
    assert "Released by the window so far: 2, 1, 3" in text
    # A hit full attention allows and the window does not: r1's row, 0 / 12 / 0.
    assert view.locator("table.hits").is_visible() and view.locator("table.hits").bounding_box()["y"] < 768  # on screen
    row = view.locator("table.hits tr", has_text="r1").inner_text().split()
    assert row[-3:] == ["0", "12", "0"]
    assert view.locator("table.hits td.cut").count() >= 1
    assert page.evaluate("() => document.scrollingElement.scrollWidth") <= 1024  # nothing runs off the side
    wait_idle(page)
    page.screenshot(path=str(tmp_path / "kv-cache-groups.png"))  # a test leaves the docs' pictures alone

    # A scenario without a window says what to add instead of failing.
    page.locator("[data-testid=stExpander] summary").first.click()
    page.locator("textarea").first.fill("blocks 8\nrequest r: a b c d")
    page.keyboard.press("Control+Enter")
    page.wait_for_function("() => document.body.innerText.includes('layers sliding:8,full')", timeout=30_000)


def test_sliding_window_lesson_plays_at_1024x768(page, app_url, tmp_path) -> None:  # type: ignore[no-untyped-def]
    """Lesson 12 on the Lessons page: its pool picture and questions render, with nothing cut off."""
    from tests.e2e.test_lessons import OVERFLOW_JS

    page.set_viewport_size({"width": 1024, "height": 768})
    open_page(page, f"{app_url}/?lesson=12-sliding-windows&line=9")  # after 'other' ran: the eviction question
    page.frame_locator("iframe[title*=lab_player]").first.locator("#pool .tile").first.wait_for(timeout=60_000)
    main = page.inner_text("[data-testid=stMain]")
    assert "Sliding windows: why hybrid models hit less" in main
    assert "Which blocks are evicted" in main
    assert page.evaluate(OVERFLOW_JS) == []
    wait_idle(page)
    page.screenshot(path=str(tmp_path / "lesson-12.png"))
