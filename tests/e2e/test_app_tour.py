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


def current_event(page) -> tuple[int, int]:  # type: ignore[no-untyped-def]
    match = EVENT_LINE.search(page.inner_text("body"))
    assert match, "the lab shows no 'Event k of n' line"
    return int(match.group(1)), int(match.group(2))


def press_and_wait(page, key: str, expected: int) -> float:  # type: ignore[no-untyped-def]
    """Press ``key``; wait until the lab shows event ``expected`` and the script is idle.

    Returns the seconds between the browser seeing the key and the repainted, idle page, measured
    inside the page (``performance.now()``, checked every animation frame), so Playwright's own
    round trips are not counted.
    """
    page.evaluate(
        "() => { window.__stepStart = null; document.addEventListener('keydown',"
        " () => { if (window.__stepStart === null) window.__stepStart = performance.now(); }, {once: true}); }"
    )
    page.keyboard.press(key)
    elapsed_ms = page.wait_for_function(
        """n => {
            const idle = document.querySelector('[data-testid=stApp][data-test-script-state=notRunning]');
            const shown = new RegExp('Event ' + n + ' of ').test(document.body.innerText);
            return idle && shown && window.__stepStart !== null ? performance.now() - window.__stepStart : false;
        }""",
        arg=str(expected), timeout=30_000,
    ).json_value()
    return float(elapsed_ms) / 1000


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
    start, total = current_event(page)
    assert total > 5
    # Streamlit binds button shortcuts once the page has fully settled; until then a key press
    # can be lost. Nudge until the first step registers, then time the ones that follow.
    for _ in range(5):
        page.keyboard.press("ArrowRight")
        page.wait_for_timeout(1500)
        if current_event(page)[0] == start + 1:
            break
    start += 1
    assert current_event(page)[0] == start, "the lab never reacted to the Right arrow key"
    timings = []
    position = start
    for key, delta in [("ArrowRight", 1)] * 4 + [("ArrowLeft", -1)] * 2 + [("ArrowRight", 1)] * 2:
        position += delta
        timings.append(press_and_wait(page, key, position))
    assert current_event(page) == (start + 4, total)
    assert_no_exceptions(page)
    print(
        f"\nlab keyboard step re-render: median {statistics.median(timings) * 1000:.0f} ms, "
        f"max {max(timings) * 1000:.0f} ms over {len(timings)} steps"
    )
