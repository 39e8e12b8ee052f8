"""Projector mode (``?projector=1``) on every page, in a real chromium at 1024x768.

What a teacher needs from a projected page, measured in the browser (in every frame, the lab
player's included):

* no sidebar;
* no visible text under 16 px (computed font size of every visible text node, SVG text too);
* nothing cut off or spilling sideways, and no inner box that scrolls sideways (a key column
  hidden at 1024 px) or a text box that scrolls inside the scrolling page;
* the lab with Compare or Predict on still fits the 768 px screen.
"""

from __future__ import annotations

import pytest

from tests.e2e.harness import PROJECTOR_SCREEN, nav_pages, open_page, wait_idle
from tests.e2e.test_layout import overflows

SCREEN = PROJECTOR_SCREEN
MIN_PX = 16

#: "what: text (NN px)" for every visible text node smaller than ``min`` px.
SMALL_TEXT_JS = """(min) => {
  const hidden = '[data-testid=stSkipToContent], [role=tooltip], [data-testid=stTooltipContent], '
    + '[data-baseweb=popover], [data-testid=stIconMaterial], .modebar, title, style, script';
  const bad = [];
  const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
  for (let node = walker.nextNode(); node; node = walker.nextNode()) {
    const text = node.textContent.trim();
    const el = node.parentElement;
    if (!text || !el || el.closest(hidden)) continue;
    const range = document.createRange();
    range.selectNodeContents(node);
    const r = range.getBoundingClientRect();
    if (r.width < 2 || r.height < 2) continue;
    let visible = true;
    for (let e = el; e; e = e.parentElement) {
      const cs = getComputedStyle(e);
      if (cs.display === 'none' || cs.visibility === 'hidden' || cs.opacity === '0') { visible = false; break; }
    }
    if (!visible) continue;
    const size = parseFloat(getComputedStyle(el).fontSize);
    if (size < min - 0.05) {
      bad.push(`${el.tagName.toLowerCase()}${el.className && typeof el.className === 'string'
        ? '.' + el.className.trim().split(/\\s+/).slice(0, 2).join('.') : ''}: `
        + `${JSON.stringify(text.slice(0, 30))} (${size} px)`);
    }
  }
  return [...new Set(bad)];
}"""

#: Boxes that scroll inside the page: sideways at all (a column hidden), or up-down when they hold text.
INNER_SCROLL_JS = """(screenHeight) => {
  const bad = [];
  for (const el of document.querySelectorAll('body *')) {
    if (el.matches('textarea, input, [data-testid=stSidebar] *, [data-baseweb=popover] *')) continue;
    const cs = getComputedStyle(el);
    const sideways = ['auto', 'scroll'].includes(cs.overflowX) && el.scrollWidth > el.clientWidth + 1;
    const updown = ['auto', 'scroll'].includes(cs.overflowY) && el.scrollHeight > el.clientHeight + 1
      && el.clientHeight < 0.9 * screenHeight;
    if ((sideways || updown) && el.clientWidth > 0) {
      bad.push(`${el.tagName.toLowerCase()}${el.dataset.testid ? '[' + el.dataset.testid + ']' : ''}`
        + ` scrolls ${sideways ? 'sideways' : 'up and down'} (${el.scrollWidth}x${el.scrollHeight} in `
        + `${el.clientWidth}x${el.clientHeight}): ${JSON.stringify((el.innerText || '').trim().slice(0, 40))}`);
    }
  }
  return bad;
}"""

#: How tall the page is: the tallest scrolling area (Streamlit scrolls inside its main block).
PAGE_HEIGHT_JS = """() => Math.max(document.documentElement.scrollHeight,
  ...[...document.querySelectorAll('[data-testid=stMain], [data-testid=stAppScrollToBottomContainer]')]
    .map(e => e.scrollHeight))"""


def in_every_frame(page, script: str, arg: object) -> list[str]:  # type: ignore[no-untyped-def]
    found: list[str] = []
    for frame in page.frames:
        try:
            items = frame.evaluate(script, arg)
        except Exception as exc:  # a detached frame: nothing to measure there
            if "Execution context was destroyed" in str(exc):
                raise
            continue
        found += [f"{'frame ' if frame != page.main_frame else ''}{item}" for item in items]
    return found


def projector_url(href: str) -> str:
    return href + ("&" if "?" in href else "?") + "projector=1"


def problems_on(page) -> list[str]:  # type: ignore[no-untyped-def]
    """Everything on the open page that a projected screen must not have."""
    found = []
    sidebar = page.query_selector("[data-testid=stSidebar]")
    if sidebar is not None and sidebar.is_visible():
        found.append("the sidebar is shown")
    found += [f"small text: {item}" for item in in_every_frame(page, SMALL_TEXT_JS, MIN_PX)]
    found += [f"inner scroll: {item}" for item in in_every_frame(page, INNER_SCROLL_JS, SCREEN["height"])]
    found += [f"overflow: {item}" for item in overflows(page)]
    return found


def test_every_page_is_readable_in_projector_mode(screen, app_url) -> None:  # type: ignore[no-untyped-def]
    open_page(screen, app_url)
    pages = nav_pages(screen)
    labels = [label for label, _ in pages]
    for wanted in ("Lessons", "Playground", "Hash chain", "Why did it miss?", "Live", "Compare", "Scenario editor"):
        assert wanted in labels, f"{wanted} is not in the navigation: {labels}"
    problems = {}
    for label, href in pages:
        open_page(screen, projector_url(href), timeout_ms=180_000)  # the Playground may load the model
        screen.wait_for_timeout(1500)  # the lab player and charts lay out after the script
        found = problems_on(screen)
        if found:
            problems[label] = found
    assert not problems, "\n".join(f"{label}:\n  " + "\n  ".join(items) for label, items in problems.items())


@pytest.mark.parametrize("mode", ["compare=1&policy=classic&step=35", "predict=1&step=33", "step=30"])
def test_the_lab_fits_one_screen_in_projector_mode(screen, app_url, mode) -> None:  # type: ignore[no-untyped-def]
    open_page(screen, f"{app_url}/lab?scenario=design-doc&{mode}&projector=1")
    screen.wait_for_timeout(1500)
    height = screen.evaluate(PAGE_HEIGHT_JS)
    for handle in screen.query_selector_all("iframe"):  # the player: its own content may run past its frame
        box, frame = handle.bounding_box(), handle.content_frame()
        if box and frame:
            height = max(height, box["y"] + frame.evaluate("() => document.documentElement.scrollHeight"))
    assert height <= SCREEN["height"], f"the lab is {height:.0f} px tall with {mode}"
    assert problems_on(screen) == []


def test_a_toggle_turns_projector_mode_on_and_off(screen, app_url) -> None:  # type: ignore[no-untyped-def]
    open_page(screen, f"{app_url}/why_miss")
    assert screen.query_selector("[data-testid=stSidebar]").is_visible()
    screen.locator(".st-key-projector_switch label").first.click()
    wait_idle(screen)
    screen.wait_for_timeout(500)
    assert not screen.query_selector("[data-testid=stSidebar]").is_visible()
    assert "projector=1" in screen.url
    open_page(screen, screen.url)  # the URL says projector=1: a shared link opens projected
    assert not screen.query_selector("[data-testid=stSidebar]").is_visible()
    screen.locator(".st-key-projector_switch label").first.click()
    wait_idle(screen)
    screen.wait_for_timeout(500)
    assert screen.query_selector("[data-testid=stSidebar]").is_visible()
    assert "projector" not in screen.url
