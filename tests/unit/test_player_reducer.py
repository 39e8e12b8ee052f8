"""The browser player's playback reducer (ui/lab_player/reducer.js), tested on its own with node's test runner."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
NODE = shutil.which("node")


@pytest.mark.skipif(NODE is None, reason="node is not installed: the player's reducer tests (tests/js) need node 20 or newer")
def test_the_playback_reducer_passes_its_node_tests() -> None:
    assert NODE is not None
    done = subprocess.run([NODE, "--test", str(ROOT / "tests" / "js")], capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    assert "# fail 0" in done.stdout
