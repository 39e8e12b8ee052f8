"""The offload tier's decisions against vLLM 0.33's own CPUOffloadingManager and its LRU/ARC policies.

:mod:`tests.vllm.offload_differential` runs in the core venv (vLLM's pure-Python core importable,
built by ``vllm-env core 0.33.0``) and compares every operation; here it runs once as it is and
once per deliberately broken rule, which must be caught. Skips, naming the venv, when it is absent.
"""

from __future__ import annotations

import json
import sys

import pytest

from tests.vllm.test_differential import core_python
from tests.vllm.venv_runner import VenvRunners

WHEEL = "0.33.0"
TRACES, OPS = 40, 150  # per policy: 12,000 compared operations in all


def run_offload_differential(venvs: VenvRunners, broken: str = "") -> tuple[int, dict]:
    python = core_python(WHEEL)
    if not python.exists():
        pytest.skip(f"no vLLM {WHEEL} core venv at {python.parent.parent} "
                    f"(build it with `vllm-env core {WHEEL}`, or set PREFIXLAB_VLLM_ENV_DIR)")
    args = ["--traces", str(TRACES), "--ops", str(OPS), *(["--break", broken] if broken else [])]
    proc = venvs.run(python, "tests.vllm.offload_differential", *args, timeout=900)
    lines = [line for line in proc.stdout.splitlines() if line.startswith("{")]
    assert lines, f"no result from the runner (exit {proc.returncode}):\n{proc.stderr[-4000:]}"
    return proc.returncode, json.loads(lines[-1])


@pytest.mark.vllm
def test_offload_tier_matches_vllm_at_every_operation(vllm_venvs):
    rc, result = run_offload_differential(vllm_venvs)
    print(json.dumps(result), file=sys.stderr)
    assert rc == 0 and result["divergences"] == 0, result.get("first_divergence")
    assert result["traces"] == 2 * TRACES and result["operations"] == 2 * TRACES * OPS
    assert result["evictions"] > 0 and result["ops"]["lookup_and_load"] > 0 and result["ops"]["reset"] > 0


@pytest.mark.vllm
@pytest.mark.parametrize("rule", ["lru-head-first", "arc-store-is-reuse"])
def test_a_broken_policy_rule_is_caught(vllm_venvs, rule):
    rc, result = run_offload_differential(vllm_venvs, rule)
    assert rc == 1 and result["divergences"] == 1, result
