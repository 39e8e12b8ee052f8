"""Every page at projector-ish sizes: no truncated button label, no text spilling out of its box.

Measured in the page (``scrollWidth > clientWidth`` on every element that holds text, in the
page and in same-origin frames such as the lab player), at 1024x768 and 1280x800. Scroll
containers (code, tables, the sidebar's own scroller) are meant to scroll and are skipped.
"""

from __future__ import annotations

import pytest

from tests.e2e.harness import nav_pages, open_page

VIEWPORTS = [(1024, 768), (1280, 800)]

#: Returns "what: text (scrollWidth > clientWidth)" for every overflowing element holding text.
OVERFLOWS_JS = """() => {
  const skip = 'pre, code, textarea, input, svg, canvas, .js-plotly-plot, [data-testid=stDataFrame],'
    + ' [data-testid=stCode], [data-testid=stTable], [data-testid=stVegaLiteChart], [role=tooltip],'
    + ' [data-testid=stTooltipContent], [data-baseweb=popover], [data-testid=stSkipToContent],'
    + ' [data-testid^=stSlider]';  // a slider's value labels sit centred over its thumb and ends
  const bad = [];
  for (const el of document.querySelectorAll('body *')) {
    if (el.closest(skip) || el.clientWidth <= 2 || el.scrollWidth <= el.clientWidth + 1) continue;
    const cs = getComputedStyle(el);
    if (cs.display === 'none' || cs.visibility === 'hidden' || ['auto', 'scroll'].includes(cs.overflowX)) continue;
    const box = el.getBoundingClientRect();
    const walker = document.createTreeWalker(el, NodeFilter.SHOW_TEXT);
    for (let node = walker.nextNode(); node; node = walker.nextNode()) {
      if (!node.textContent.trim() || node.parentElement.closest(skip)) continue;
      const range = document.createRange();
      range.selectNodeContents(node);
      const r = range.getBoundingClientRect();
      if (r.width && (r.right > box.right + 1 || r.left < box.left - 1)) {
        bad.push(`${el.tagName.toLowerCase()}${el.dataset.testid ? '[' + el.dataset.testid + ']' : ''}`
          + `${el.id ? '#' + el.id : ''}: ${JSON.stringify(node.textContent.trim().slice(0, 40))}`
          + ` spills ${Math.round(Math.max(r.right - box.right, box.left - r.left))} px`);
        break;
      }
    }
  }
  const main = document.querySelector('[data-testid=stMain]');
  if (main && main.scrollWidth > main.clientWidth + 1) bad.push(`the page scrolls sideways (${main.scrollWidth} > ${main.clientWidth})`);
  return [...new Set(bad)];
}"""


def overflows(page) -> list[str]:  # type: ignore[no-untyped-def]
    found = []
    for frame in page.frames:
        try:
            found += [f"{'frame ' if frame != page.main_frame else ''}{item}" for item in frame.evaluate(OVERFLOWS_JS)]
        except Exception as exc:  # a cross-origin or detached frame: nothing to measure there
            if "Execution context was destroyed" in str(exc):
                raise
    return found


@pytest.mark.parametrize("size", VIEWPORTS, ids=[f"{w}x{h}" for w, h in VIEWPORTS])
def test_no_truncated_or_overflowing_text_on_any_page(browser, app_url, size) -> None:  # type: ignore[no-untyped-def]
    width, height = size
    context = browser.new_context(viewport={"width": width, "height": height})
    page = context.new_page()
    try:
        open_page(page, app_url)
        urls = [href for _, href in nav_pages(page)]
        urls += [f"{app_url}/lab?projector=1", f"{app_url}/lab?compare=1&policy=classic&step=35"]
        problems = {}
        for url in urls:
            open_page(page, url, timeout_ms=180_000)  # the Playground may load the model
            page.wait_for_timeout(1200)  # the lab player and charts lay out after the script
            found = overflows(page)
            if found:
                problems[url] = found
        assert not problems, "\n".join(f"{u}:\n  " + "\n  ".join(items) for u, items in problems.items())
    finally:
        context.close()
