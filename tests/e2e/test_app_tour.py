"""The whole app in a real chromium: every page loads, and the lab steps with the keyboard.

The lab test also measures how long one keyboard step takes to re-render (key press -> the
new "Event k of n" painted and the script idle) and prints it; timings are reported, never
asserted (the machine is shared and noisy).
"""

from __future__ import annotations

import re
import statistics

from tests.e2e.harness import assert_no_exceptions, nav_pages, open_page

EVENT_LINE = re.compile(r"Event (\d+) of (\d+)")
PLAYER = "iframe[title*=lab_player]"


def player(page):  # type: ignore[no-untyped-def]
    """The lab player's frame (ui/lab_player), once it has drawn its first state."""
    page.wait_for_selector(PLAYER, timeout=30_000)
    frame = page.query_selector(PLAYER).content_frame()
    frame.wait_for_selector("#card .head", timeout=30_000)
    return frame


def current_event(frame) -> tuple[int, int]:  # type: ignore[no-untyped-def]
    match = EVENT_LINE.search(frame.inner_text("#card"))
    assert match, "the lab shows no 'Event k of n' line"
    return int(match.group(1)), int(match.group(2))


def press_and_wait(page, frame, key: str, expected: int) -> float:  # type: ignore[no-untyped-def]
    """Press ``key``; wait until the player's card shows event ``expected``.

    Returns the seconds between the page seeing the key and the card changing, measured inside
    the page (``performance.now()`` and a MutationObserver), so Playwright's own round trips are
    not counted. The player steps in the browser: no server round trip is involved.
    """
    # The key lands in the player's frame when it has focus, else in the page: listen in both.
    frame.evaluate(
        "() => { window.__stepStart = null; const mark = () => { if (window.__stepStart === null)"
        " window.__stepStart = performance.now(); };"
        " for (const d of [document, window.parent.document]) d.addEventListener('keydown', mark, {once: true, capture: true});"
        " window.__stepEnd = null; const seen = new MutationObserver(() => { if (window.__stepEnd === null)"
        " window.__stepEnd = performance.now(); seen.disconnect(); });"
        " seen.observe(document.getElementById('card'), {childList: true, subtree: true, characterData: true}); }"
    )
    page.keyboard.press(key)
    frame.wait_for_function(
        "n => new RegExp('Event ' + n + ' of ').test(document.getElementById('card').innerText)",
        arg=str(expected), timeout=10_000,
    )
    return float(frame.evaluate("() => window.__stepEnd - window.__stepStart")) / 1000


def test_every_page_in_the_navigation_loads(page, app_url) -> None:  # type: ignore[no-untyped-def]
    open_page(page, app_url)
    pages = nav_pages(page)
    labels = [label for label, _ in pages]
    for expected in ("Block pool & eviction lab", "Scenario editor", "Hash chain", "Why did it miss?"):
        assert expected in labels, labels
    for label, href in pages:
        open_page(page, href, timeout_ms=180_000)  # the Playground may load the model
        main = page.inner_text("[data-testid=stMain]")
        assert label.lower() in main.lower(), f"{href} does not show its title {label!r}"
        assert_no_exceptions(page)


def test_lab_steps_forward_and_back_with_the_keyboard(page, app_url) -> None:  # type: ignore[no-untyped-def]
    open_page(page, f"{app_url}/lab")
    frame = player(page)
    start, total = current_event(frame)
    assert start == 0 and total > 5
    timings = []
    position = start
    for key, delta in [("ArrowRight", 1)] * 5 + [("ArrowLeft", -1)] * 2 + [("ArrowRight", 1)] * 2:
        position += delta
        timings.append(press_and_wait(page, frame, key, position))
    assert current_event(frame) == (5, total)
    assert_no_exceptions(page)
    print(
        f"\nlab keyboard step (in the browser): median {statistics.median(timings) * 1000:.0f} ms, "
        f"max {max(timings) * 1000:.0f} ms over {len(timings)} steps"
    )
