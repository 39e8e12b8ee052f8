"""The lab's browser player says the same words as Python's figures (issue 21, one word for one thing).

At the start every block is empty and never used: the free queue's head is only "next to be
reused" (nothing is evicted). Once r0 has finished under vLLM 0.33, a hashless block heads the
queue and the first block still holding a hash "will be evicted", with evictions still 0.
"""

from __future__ import annotations

import pytest

from tests.e2e.harness import open_page
from tests.e2e.test_lab_player import player_frame
from viz.free_queue import QUEUE_MARKS

pytestmark = pytest.mark.e2e


def marks(frame) -> list[str]:  # type: ignore[no-untyped-def]
    return frame.evaluate("() => [...document.querySelectorAll('.mark')].map((m) => m.textContent)")


def test_the_players_queue_marks_are_pythons_words(page, app_url) -> None:  # type: ignore[no-untyped-def]
    open_page(page, f"{app_url}/lab?scenario=design-doc&policy=vllm")
    frame = player_frame(page)
    assert marks(frame) == [QUEUE_MARKS["reused"] + " ▼"]
    assert "victim" not in frame.evaluate("() => document.body.innerText").lower()
    for _ in range(60):  # step until a cached block sits behind the head
        page.keyboard.press("ArrowRight")
        page.wait_for_timeout(80)
        if len(marks(frame)) == 2:
            break
    assert marks(frame) == [QUEUE_MARKS["reused"] + " ▼", QUEUE_MARKS["evicted"] + " ▼"]
    assert "evictions 0" in frame.evaluate("() => document.body.innerText")
