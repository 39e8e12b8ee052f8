"""Thread priorities of a server: page scripts below, forward passes at the normal priority where allowed."""

from __future__ import annotations

import sys
import threading

import pytest

from engine.runtime.priority import can_restore_priority, normal_priority, set_thread_nice, thread_nice

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="per-thread nice values are Linux's")


def in_a_thread(fn):
    """Run ``fn`` in a fresh thread (a nice value set there never touches the test runner's thread)."""
    result: list = []
    thread = threading.Thread(target=lambda: result.append(fn()))
    thread.start()
    thread.join(timeout=10)
    return result[0]


def test_a_pass_runs_at_the_normal_priority_and_the_page_gets_its_own_back():
    def page() -> tuple[int, int, int]:
        assert set_thread_nice(10)
        with normal_priority():
            during = thread_nice()
        return thread_nice(), during, 10

    after, during, own = in_a_thread(page)
    assert after == own
    assert during == (0 if can_restore_priority() else own)


def test_a_thread_at_the_normal_priority_is_left_alone():
    def page() -> int:
        with normal_priority():
            return thread_nice()

    assert in_a_thread(page) == 0
