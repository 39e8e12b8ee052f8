"""The weights on transparent huge pages: glibc's tunable, set for the processes that load a model."""

from __future__ import annotations

import subprocess
import sys

import pytest

from engine.runtime.huge_pages import HUGE_PAGES_TUNABLE, THP_SETTING, huge_pages_env


def thp_available() -> bool:
    try:
        return sys.platform.startswith("linux") and "[never]" not in THP_SETTING.read_text()
    except OSError:
        return False


needs_thp = pytest.mark.skipif(not thp_available(), reason="this kernel gives no transparent huge pages")


def test_the_tunable_is_added_once_beside_the_users_own():
    assert huge_pages_env({})["GLIBC_TUNABLES"] == HUGE_PAGES_TUNABLE
    mine = huge_pages_env({"GLIBC_TUNABLES": "glibc.malloc.arena_max=2", "HOME": "/h"})
    assert mine == {"GLIBC_TUNABLES": f"glibc.malloc.arena_max=2:{HUGE_PAGES_TUNABLE}", "HOME": "/h"}
    assert huge_pages_env(mine) == mine


@needs_thp
def test_a_process_started_with_it_holds_its_big_tensors_on_huge_pages():
    script = ("import torch\nx = torch.ones(64 * 2**20 // 4)\n"
              "print(next(int(l.split()[1]) for l in open('/proc/self/smaps_rollup') if l.startswith('AnonHugePages:')))")

    def huge_kib(env: dict[str, str]) -> int:
        return int(subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True,
                                  check=True).stdout)

    plain = {"PATH": "/usr/bin:/bin"}
    assert huge_kib(huge_pages_env(plain)) >= 32 * 1024  # most of the 64 MiB tensor
    if "[madvise]" in THP_SETTING.read_text():  # huge pages only for memory that asks
        assert huge_kib(plain) < 32 * 1024
