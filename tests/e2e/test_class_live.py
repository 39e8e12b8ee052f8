"""The whole class in a real chromium: ``prefixlab class`` starts two replicas, vLLM's router and the app;
the Live page (pointed at the replicas by the command) fills while requests go through the router.

Requests come from the real ``openai`` client through ``vllm-router`` (round robin, so both replicas
get some); the page must connect to both replicas by itself and count cached blocks on each. Then
SIGTERM stops the command, and every process it started is gone and every port free.
Skips without ``vllm-router``.
"""

from __future__ import annotations

import pytest

from engine.server.cluster import find_router, router_missing_message
from teaching.live.client import send_chat
from tests.e2e.harness import open_page
from tests.live.class_process import ClassPorts, class_command
from tests.ports import for_worker

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

SYSTEM = "You are the class tutor. Explain caching with one short example about trains and timetables."
QUESTIONS = ("Hi!", "Why do trains wait?", "What is a timetable?", "And a delay?")
CACHED_BLOCKS_PER_REPLICA = """() => {
    const values = [...document.querySelectorAll('[data-testid=stMetric]')]
        .filter(m => m.innerText.includes('cached blocks'))
        .map(m => parseInt(m.querySelector('[data-testid=stMetricValue]').innerText));
    return values.length >= 2 && values.every(v => v > 0) ? values : null;
}"""


def test_live_page_fills_from_the_replicas_behind_the_router(page, tmp_path) -> None:  # type: ignore[no-untyped-def]
    if find_router() is None:
        pytest.skip(router_missing_message())
    ports = ClassPorts.pick(2, http=for_worker(range(8910, 8940, 3)), router=for_worker(range(8940, 8950, 2)),
                            events=for_worker(range(6600, 6640, 4)), app=for_worker(range(8950, 8980)))
    with class_command(ports, tmp_path, "--policy", "round_robin", "--num-blocks", "128") as running:
        open_page(page, ports.app_url, timeout_ms=180_000)
        page.locator("a[data-testid=stSidebarNavLink]", has_text="Live").click()
        page.get_by_role("heading", name="Live").wait_for(timeout=120_000)
        # the class command named both replicas: the page connects to them on its first visit
        page.wait_for_function("""() => { const s = document.querySelector('[data-testid=live-status]')?.innerText || '';
                                          return s.includes('replica-0') && s.includes('replica-1')
                                                 && (s.match(/connected/g) || []).length === 2; }""", timeout=120_000)

        for question in QUESTIONS:  # round robin: two on each replica, the second of each a cache hit
            result = send_chat(ports.router_url, [{"role": "system", "content": SYSTEM},
                                                  {"role": "user", "content": question}], max_tokens=4)
            assert result.prompt_tokens
        cached = page.wait_for_function(CACHED_BLOCKS_PER_REPLICA, timeout=60_000).json_value()
        assert len(cached) == 2, cached  # one tree per replica, each with blocks

        children = running.children()
        page.goto("about:blank")  # leave the app before it stops
        running.stop_and_check(children)
