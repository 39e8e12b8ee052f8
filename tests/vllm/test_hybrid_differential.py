"""PrefixLab's hybrid KV cache groups against vLLM 0.33's own coordinator.

Runs :mod:`tests.vllm.hybrid_differential` in the vLLM 0.33 core venv (``vllm-env core 0.33.0``):
seeded random traces over several layer mixes, compared after every operation. Skips, saying
which venv is missing, when it is absent. A second test patches one sliding-window rule at a
time and expects the comparison to catch it.
"""

from __future__ import annotations

import json
import sys

import pytest

from tests.vllm.test_differential import core_python
from tests.vllm.venv_runner import VenvRunners

WHEEL = "0.33.0"
NUM_TRACES = 50
OPS_PER_TRACE = 120


def run_hybrid(venvs: VenvRunners, *args: str) -> tuple[int, dict]:
    python = core_python(WHEEL)
    if not python.exists():
        pytest.skip(f"no vLLM {WHEEL} core venv at {python.parent.parent} "
                    f"(build it with `vllm-env core {WHEEL}`, or set PREFIXLAB_VLLM_ENV_DIR)")
    proc = venvs.run(python, "tests.vllm.hybrid_differential", *args, timeout=600)
    lines = [line for line in proc.stdout.splitlines() if line.startswith("{")]
    assert lines, f"no result from the runner (exit {proc.returncode}):\n{proc.stdout[-2000:]}\n{proc.stderr[-4000:]}"
    return proc.returncode, json.loads(lines[-1])


@pytest.mark.vllm
def test_hybrid_groups_match_vllm_033(vllm_venvs):
    code, result = run_hybrid(vllm_venvs, "--traces", str(NUM_TRACES), "--ops", str(OPS_PER_TRACE), "--seed", "0")
    print(json.dumps(result), file=sys.stderr)
    assert code == 0 and "error" not in result, result.get("error")
    assert result["vllm"] == WHEEL
    assert result["operations"] == NUM_TRACES * OPS_PER_TRACE >= 5000
    # The traces exercised what hybrid groups add.
    assert set(result["mixes"]) == {"full+sliding", "sliding*2+full", "full+two-windows", "gemma3", "sliding-only", "full-only"}
    assert 1 in result["windows"] and max(result["windows"]) >= 8
    assert result["null_slots"] > 0  # windows released blocks
    assert result["sliding_stored"] > 0 and result["sliding_hits"] > 0
    assert result["hits_cut_by_a_window"] > 0  # full attention alone would have hit more
    assert result["caching_off_traces"] > 0 and result["watermark_traces"] > 0 and result["watermark_refusals"] > 0
    assert result["by_kind"]["preempt"] > 0 and result["resets"] > 0 and result["evictions"] > 0


@pytest.mark.vllm
@pytest.mark.parametrize("rule", ["skip-one-more", "window-blocks", "no-release"])
def test_a_broken_window_rule_is_caught(vllm_venvs, rule):
    # Each of these rules diverges within the first ten traces; the run stops at the first difference.
    code, result = run_hybrid(vllm_venvs, "--traces", "10", "--ops", str(OPS_PER_TRACE), "--seed", "0", "--break", rule)
    assert code == 1 and "error" in result, f"breaking {rule!r} went unnoticed: {result}"
