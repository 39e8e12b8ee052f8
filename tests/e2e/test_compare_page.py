"""The Compare page in chromium at 1024x768: its three-settings bars come with the page."""

from __future__ import annotations

from tests.e2e.harness import open_and_see_at_once


def test_compare_bars_show_at_once(page, app_url) -> None:  # type: ignore[no-untyped-def]
    """The bars are HTML in the page's own render (they were a Plotly chart, blank ~0.9 s while Plotly.js loaded)."""
    page.set_viewport_size({"width": 1024, "height": 768})
    open_and_see_at_once(page, f"{app_url}/compare", ".pl-bars", "Prompt tokens served from the cache")
    bars = page.locator(".pl-bars [data-setting]")
    assert bars.count() == 6  # three settings, two panels
    widths = bars.evaluate_all("rows => rows.map(r => r.children[1].getBoundingClientRect().width)")
    assert widths[0] <= 2 < widths[1], f"caching off hits nothing; vLLM's bar has a width: {widths}"
