"""Production traces page in a real chromium, on the full Mooncake conversation trace.

Skipped when the full traces are not beside the repository (``../shared/data/traces``).
The 33 replays of the whole trace take a minute or more on a busy machine: the test waits
for the progress bar, then for the curve.
"""

from __future__ import annotations

import pytest

from teaching.traces.sources import CONVERSATION, shared_traces_dir
from tests.e2e.harness import ROOT, open_page, wait_idle

pytestmark = pytest.mark.e2e
REPLAY_TIMEOUT_MS = 900_000  # the whole curve on the full trace, on a shared 2-core machine


def plot_with(page, text: str):  # type: ignore[no-untyped-def]
    return page.locator(".js-plotly-plot", has_text=text)


def test_curve_on_the_full_conversation_trace(page, streamlit_servers) -> None:  # type: ignore[no-untyped-def]
    if not (shared_traces_dir() / CONVERSATION).exists():
        pytest.skip(f"the full conversation trace is not in {shared_traces_dir()}")
    url = f"{streamlit_servers('app.py').url}/traces" if (ROOT / "app.py").exists() else \
        streamlit_servers("app_pages/traces.py").url
    open_page(page, url, timeout_ms=300_000)
    # The shipped sample replays at once.
    plot_with(page, "Hit rate against cache capacity").wait_for(timeout=300_000)
    assert "unbounded cache: 16.4%" in (plot_with(page, "Hit rate against cache capacity").text_content() or "")

    page.locator("[data-testid=stSelectbox]", has_text="Trace").click()
    page.get_by_role("option", name="conversation_trace (full)").click()
    page.wait_for_function("() => document.body.innerText.includes('12,031')", timeout=300_000)
    wait_idle(page, timeout_ms=300_000)
    assert "288,500" in page.inner_text("body")
    page.get_by_role("button", name="Replay 4 policies × 8 capacities").click()
    page.locator("[data-testid=stProgress]").first.wait_for(timeout=60_000)
    curve = plot_with(page, "Hit rate against cache capacity")
    curve.wait_for(timeout=REPLAY_TIMEOUT_MS)
    wait_idle(page, timeout_ms=REPLAY_TIMEOUT_MS)
    text = curve.text_content() or ""
    assert "unbounded cache: 37.3%" in text
    for name in ("vLLM 0.33 LRU", "vLLM 0.23 (classic) LRU", "radix-tree LRU", "Belady optimum"):
        assert name in text
    assert plot_with(page, "Along the trace").count() == 1
    table = page.locator("[data-testid=stDataFrame]").first
    assert table.is_visible()
