"""The offload tier's decisions against vLLM 0.33's own CPUOffloadingManager and its LRU/ARC policies.

:mod:`tests.vllm.offload_differential` runs in the core venv (vLLM's pure-Python core importable,
built by ``vllm-env core 0.33.0``) and compares every operation; here it runs once as it is and
once per deliberately broken rule, which must be caught. Skips, naming the venv, when it is absent.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from tests.vllm.test_differential import REPO_ROOT, core_python

WHEEL = "0.33.0"
TRACES, OPS = 40, 150  # per policy: 12,000 compared operations in all


def run_offload_differential(broken: str = "") -> tuple[int, dict]:
    python = core_python(WHEEL)
    if not python.exists():
        pytest.skip(f"no vLLM {WHEEL} core venv at {python.parent.parent} "
                    f"(build it with `vllm-env core {WHEEL}`, or set PREFIXLAB_VLLM_ENV_DIR)")
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT), "VLLM_LOGGING_LEVEL": "ERROR"}
    command = [str(python), "-m", "tests.vllm.offload_differential", "--traces", str(TRACES), "--ops", str(OPS)]
    if broken:
        command += ["--break", broken]
    proc = subprocess.run(command, cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=900)
    lines = [line for line in proc.stdout.splitlines() if line.startswith("{")]
    assert lines, f"no result from the runner (exit {proc.returncode}):\n{proc.stderr[-4000:]}"
    return proc.returncode, json.loads(lines[-1])


@pytest.mark.vllm
def test_offload_tier_matches_vllm_at_every_operation():
    rc, result = run_offload_differential()
    print(json.dumps(result), file=sys.stderr)
    assert rc == 0 and result["divergences"] == 0, result.get("first_divergence")
    assert result["traces"] == 2 * TRACES and result["operations"] == 2 * TRACES * OPS
    assert result["evictions"] > 0 and result["ops"]["lookup_and_load"] > 0 and result["ops"]["reset"] > 0


@pytest.mark.vllm
@pytest.mark.parametrize("rule", ["lru-head-first", "arc-store-is-reuse"])
def test_a_broken_policy_rule_is_caught(rule):
    rc, result = run_offload_differential(rule)
    assert rc == 1 and result["divergences"] == 1, result
