"""The app tunes its server's Python for a room on its first run: the GIL's switch interval and the GC threshold."""

from __future__ import annotations

import gc
import sys

from streamlit.testing.v1 import AppTest

from teaching import limits
from tests.app.conftest import APP, TIMEOUT


def test_a_run_of_the_app_sets_the_rooms_switch_interval_and_gc_threshold() -> None:
    interval, threshold = sys.getswitchinterval(), gc.get_threshold()
    try:
        sys.setswitchinterval(0.005)
        gc.set_threshold(700, *threshold[1:])
        at = AppTest.from_file(APP, default_timeout=TIMEOUT).run()
        assert not at.exception, at.exception
        assert sys.getswitchinterval() == limits.SERVER_SWITCH_INTERVAL_S
        assert gc.get_threshold() == (limits.SERVER_GC_THRESHOLD, *threshold[1:])
    finally:
        sys.setswitchinterval(interval)
        gc.set_threshold(*threshold)
