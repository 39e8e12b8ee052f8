"""The Live page at class scale, in a real chromium: 10,000+ cached blocks on each of two replicas.

The events are a real engine's (:mod:`tests.live.engine_recording`: the simulator back end's
scheduler, cache and hashes), served by two real ZMQ publishers speaking vLLM's protocol (PUB and
replay). The page must draw both trees legibly: no two label boxes overlap (measured in the
browser), a bounded number of labels, and zooming into a branch redraws it. The redraw times are
printed, never asserted.
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from teaching.live.radix import MAX_VIEW_EDGES
from tests.e2e.harness import open_page, wait_idle
from tests.live.conftest import ZMQ_PORTS, free_port, hf_tokenizer  # noqa: F401  (a fixture)
from tests.live.engine_recording import class_prompts, engine_frames
from tests.live.publisher import ReplayingPublisher

REPLICAS = ("replica-0", "replica-1")
MIN_BLOCKS = 10_000

#: Every visible label of every icicle, as boxes in page pixels (one synchronous snapshot).
LABEL_BOXES = """() => [...document.querySelectorAll('.js-plotly-plot')].flatMap((plot, chart) =>
  [...plot.querySelectorAll('g.slice text.slicetext')].filter(t => {
    const s = getComputedStyle(t);
    const r = t.getBoundingClientRect();
    return t.textContent.trim() && s.display !== 'none' && s.visibility !== 'hidden' && Number(s.opacity) > 0
      && r.width > 0 && r.height > 0;
  }).map(t => { const r = t.getBoundingClientRect();
                return {chart, text: t.textContent, x0: r.left, y0: r.top, x1: r.right, y1: r.bottom}; }))"""


TITLE_COUNTS = """() => [...document.querySelectorAll('.js-plotly-plot')].filter(p => p.querySelector('g.slice'))
    .map(p => (p.querySelector('.gtitle') || {}).textContent || '').filter(t => /^replica-\\d · \\d+ blocks/.test(t))
    .map(t => parseInt(t.split(' · ')[1]))"""
ZOOMED = """() => [...document.querySelectorAll('.js-plotly-plot .gtitle')].some(t => t.textContent.includes('zoomed into'))"""


SIBLING_LABELS = """() => [...document.querySelectorAll('.js-plotly-plot')]
    .filter(p => p.data && p.data[0] && p.data[0].type === 'icicle').flatMap(p => {
      const groups = {};
      p.data[0].parents.forEach((parent, i) => (groups[parent] = groups[parent] || []).push(p.data[0].labels[i]));
      return Object.values(groups); })"""


def overlaps(boxes: list[dict]) -> list[tuple[str, str]]:
    """Pairs of label boxes that intersect (by more than half a pixel, for anti-aliasing)."""
    found = []
    for i, a in enumerate(boxes):
        for b in boxes[i + 1:]:
            if min(a["x1"], b["x1"]) - max(a["x0"], b["x0"]) > 0.5 and min(a["y1"], b["y1"]) - max(a["y0"], b["y0"]) > 0.5:
                found.append((a["text"], b["text"]))
    return found


@pytest.fixture(scope="module")
def replicas(hf_tokenizer) -> Iterator[list[tuple[str, ReplayingPublisher]]]:  # type: ignore[no-untyped-def]  # noqa: F811
    """Two publishers whose replay buffers hold a class's worth of events each (different students)."""
    publishers: list[tuple[str, ReplayingPublisher]] = []
    try:
        for index, name in enumerate(REPLICAS):
            prompts = class_prompts(lambda text: hf_tokenizer.encode(text), students=160, turns=5, seed=index)
            events = free_port(ZMQ_PORTS)
            replay = free_port(range(events + 1, ZMQ_PORTS.stop))
            publisher = ReplayingPublisher(events, replay)
            for frame in engine_frames(prompts, name):
                publisher.publish(frame.payload, send=False)  # buffered: the page gets it all by replay
            publishers.append((f"{name} tcp://127.0.0.1:{events} tcp://127.0.0.1:{replay} -", publisher))
        yield publishers
    finally:
        for _, publisher in publishers:
            publisher.close()


def choose(page, box, nth: int | None = None, name: str | None = None) -> None:  # type: ignore[no-untyped-def]
    """Pick an option of a select box (again if a redraw closed the list before the click)."""
    for _ in range(5):
        box.click()
        options = page.locator("[role=option]", has_text=name) if name else page.locator("[role=option]")
        try:
            (options.first if name else options.nth(nth or 0)).click(timeout=3_000)
            return
        except Exception:  # the list closed under us: open it again
            page.keyboard.press("Escape")
    raise AssertionError("could not pick an option of the zoom select box")


def cached_blocks(page) -> list[int]:  # type: ignore[no-untyped-def]
    """The block count in each icicle's title (``replica-0 · 10152 blocks``)."""
    return page.evaluate(TITLE_COUNTS)


def test_two_replicas_of_ten_thousand_blocks_draw_legibly(page, app_url, replicas, tmp_path) -> None:  # type: ignore[no-untyped-def]
    open_page(page, app_url, timeout_ms=180_000)
    page.locator("a[data-testid=stSidebarNavLink]", has_text="Live").click()
    page.get_by_role("heading", name="Live").wait_for(timeout=120_000)
    wait_idle(page, timeout_ms=120_000)
    servers = page.locator("[data-testid=stTextArea]", has_text="Servers").locator("textarea")
    servers.fill("\n".join(line for line, _ in replicas))
    servers.press("Control+Enter")
    started = time.monotonic()
    page.get_by_role("button", name="Connect", exact=True).click()
    page.wait_for_function(f"""() => {{ const counts = ({TITLE_COUNTS})();
        return counts.length === 2 && counts.every(c => c >= {MIN_BLOCKS}); }}""", timeout=120_000)
    filled_s = time.monotonic() - started
    blocks = cached_blocks(page)
    assert len(blocks) == 2 and min(blocks) >= MIN_BLOCKS, blocks
    assert page.locator("[data-testid=live-status]").inner_text().count("connected") == 2

    # legible: every visible label clear of every other, a bounded number of them, each run's own words
    boxes = page.evaluate(LABEL_BOXES)
    assert not overlaps(boxes), overlaps(boxes)[:5]
    assert 10 <= len(boxes) <= 2 * (MAX_VIEW_EDGES + 40), len(boxes)
    assert sum("more ·" in b["text"] for b in boxes) >= 2  # small branches folded, counted
    sibling_groups = page.evaluate(SIBLING_LABELS)
    for labels in sibling_groups:  # siblings never read alike
        assert len(set(labels)) == len(labels), labels
    assert page.locator("text=Where the latest requests went").count() == 1
    body = page.locator("body").inner_text()
    assert "replica-0" in body and "replica-1" in body

    page.locator(".js-plotly-plot").first.scroll_into_view_if_needed()
    page.screenshot(path=str(tmp_path / "live-scale.png"))

    # zoom into the biggest branches of replica-0 with the select box, and time each redraw
    redraws = []
    box = page.locator("[data-testid=stSelectbox]", has_text="Zoom into a branch").first
    for attempt in range(3):
        choose(page, box, nth=1 + attempt)
        clicked = time.monotonic()
        page.wait_for_function(ZOOMED, timeout=60_000)
        redraws.append(time.monotonic() - clicked)
        page.wait_for_timeout(300)
        zoomed = page.evaluate(LABEL_BOXES)
        assert not overlaps(zoomed), overlaps(zoomed)[:5]
        assert any(" asks:" in b["text"] for b in zoomed), [b["text"] for b in zoomed]  # the students' own runs
        for labels in page.evaluate(SIBLING_LABELS):
            assert len(set(labels)) == len(labels), labels
        if attempt == 0:
            page.screenshot(path=str(tmp_path / "live-zoomed.png"))
        choose(page, box, name="the whole cache")
        page.wait_for_function(f"() => !({ZOOMED})()", timeout=60_000)
    print(f"\nLive at scale: {blocks} cached blocks; filled (connect -> both trees drawn) in {filled_s:.2f} s; "
          f"{len(boxes)} labels, 0 overlapping; zoom redraws (select -> new tree in the DOM): "
          + ", ".join(f"{r:.2f} s" for r in redraws) + f" (picture: {tmp_path / 'live-scale.png'})")
