"""The Lessons page in a real chromium at 1024x768: its pictures come with the page, keys step,
questions sit beside the picture, a new lesson opens at its top, and nothing is cut off."""

from __future__ import annotations

import re

import pytest

from tests.e2e.harness import assert_no_exceptions, open_page, wait_idle

PLAYER = "iframe[title*=lab_player]"  # the one renderer of the pool (ui/lab_player)

STEP_LINE = re.compile(r"Step (\d+) of (\d+)")
OVERFLOW_JS = """() => Array.from(document.querySelectorAll(
    '[data-testid=stMain] button, [data-testid=stMain] button *, .lesson-log, .lesson-script, [data-testid=stMain] label'))
  .filter(el => el.clientWidth > 0 && el.scrollWidth > el.clientWidth + 1)
  .map(el => (el.innerText || '').slice(0, 40) + ' ' + el.scrollWidth + '>' + el.clientWidth)"""


def step(page) -> int:  # type: ignore[no-untyped-def]
    match = STEP_LINE.search(page.inner_text("[data-testid=stMain]"))
    assert match, "the lesson shows no 'Step k of n' line"
    return int(match.group(1))


def press_until(page, key: str, wanted: int) -> None:  # type: ignore[no-untyped-def]
    """Streamlit binds shortcuts once the page settles; a first press can be lost, so retry a few times."""
    for _ in range(5):
        page.keyboard.press(key)
        page.wait_for_timeout(1200)
        wait_idle(page)
        if step(page) == wanted:
            return
    raise AssertionError(f"{key} did not reach step {wanted} (at {step(page)})")


def test_a_first_visit_steps_a_lesson_with_the_arrow_keys(page, app_url) -> None:  # type: ignore[no-untyped-def]
    page.set_viewport_size({"width": 1024, "height": 768})
    open_page(page, app_url)
    assert "Tokens, KV blocks and paged attention" in page.inner_text("[data-testid=stMain]")
    assert step(page) == 0
    press_until(page, "ArrowRight", 1)
    press_until(page, "ArrowRight", 2)
    press_until(page, "ArrowLeft", 1)
    assert "line=" in page.url
    assert_no_exceptions(page)


def test_a_question_sits_beside_its_picture_and_nothing_is_cut_off(page, app_url) -> None:  # type: ignore[no-untyped-def]
    page.set_viewport_size({"width": 1024, "height": 768})
    open_page(page, f"{app_url}/?lesson=01-kv-blocks&line=4")  # just before r0's first step: Q1 and Q2 are asked
    question = page.get_by_text("Q1.", exact=False).first
    grid = page.locator(PLAYER).first
    question.wait_for()
    q_box, g_box = question.bounding_box(), grid.bounding_box()
    assert q_box and g_box
    assert q_box["x"] > g_box["x"] + g_box["width"] - 5, "the question is not beside the picture"
    assert abs(q_box["y"] - g_box["y"]) < 400, (q_box, g_box)
    assert page.evaluate(OVERFLOW_JS) == []
    assert "@r0" not in page.inner_text("[data-testid=stMain]")


def test_next_lesson_opens_at_its_top(page, app_url) -> None:  # type: ignore[no-untyped-def]
    page.set_viewport_size({"width": 1024, "height": 768})
    open_page(page, f"{app_url}/?lesson=01-kv-blocks")
    button = page.get_by_role("button", name=re.compile("Next lesson"))
    button.scroll_into_view_if_needed()
    assert page.evaluate("() => document.querySelector('[data-testid=stMain]').scrollTop") > 300
    button.click()
    page.wait_for_timeout(800)
    wait_idle(page)
    page.wait_for_timeout(500)
    assert "Chained hashing" in page.inner_text("h2")
    assert page.evaluate("() => document.querySelector('[data-testid=stMain]').scrollTop") < 50
    assert_no_exceptions(page)


PAGE_OVERFLOW_JS = """() => Array.from(document.querySelectorAll(
    '[data-testid=stMain] button, [data-testid=stMain] button *, [data-testid=stMain] label, [data-testid=stMain] p'))
  .filter(el => el.clientWidth > 0 && el.scrollWidth > el.clientWidth + 1)
  .map(el => (el.innerText || '').slice(0, 40) + ' ' + el.scrollWidth + '>' + el.clientWidth)"""


@pytest.mark.parametrize("path", ["", "hash_chain", "why_miss", "scenario_editor", "compare"])
def test_no_cut_off_labels_at_1024x768(page, app_url, path: str) -> None:  # type: ignore[no-untyped-def]
    page.set_viewport_size({"width": 1024, "height": 768})
    open_page(page, f"{app_url}/{path}")
    assert page.evaluate(PAGE_OVERFLOW_JS) == []


def test_the_first_page_draws_its_pool_with_the_player(page, app_url) -> None:  # type: ignore[no-untyped-def]
    """The landing lesson's pool, free queue and block tables are the player's (no HTML twin of them)."""
    page.set_viewport_size({"width": 1024, "height": 768})
    open_page(page, f"{app_url}/?lesson=01-kv-blocks&line=4")
    assert page.locator(".pl-pool").count() == 0
    frame = page.frame_locator(PLAYER).first
    root = frame.locator("[data-testid=prefixlab-player][data-mode=view]")
    root.locator(".tile").first.wait_for(timeout=30_000)
    assert "Physical KV blocks" in root.inner_text() and "free queue" in root.inner_text()
    assert not frame.locator("#controls").is_visible()  # the lesson's own Next and Back move it
    assert frame.locator(".tile.touched").count() == 0  # line 4 only adds a request: nothing is outlined
    page.get_by_role("button", name="Next").first.click()  # line 5: r0's first step allocates blocks 1-3
    frame.locator(".tile.touched").first.wait_for(timeout=30_000)
    page.wait_for_timeout(300)
    touched = frame.locator(".tile.touched").evaluate_all("ts => ts.map(t => +t.dataset.block)")
    assert touched == [1, 2, 3]
