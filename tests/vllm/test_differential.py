"""PrefixLab's cache against the real vLLM wheels, one run per reproduced version.

Each run has the core venv's python (vLLM's pure-Python core importable, built by
``vllm-env core VERSION``; one warm process per venv, see :mod:`tests.vllm.venv_runner`) run
:mod:`tests.vllm.differential`, which replays seeded random traces
on vLLM's ``KVCacheManager``/``BlockPool`` and on ours with the matching ``vllm_version``, and
compares after every operation. The venvs live outside the project (a few GB each): the tests
skip, saying which venv is missing, when it is absent.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

from engine.vllm_versions import VLLM_VERSIONS
from tests.vllm.venv_runner import VenvRunners

#: Traces per version: ~2,400 operations, about 20 s (vLLM and torch are imported once per venv and session).
NUM_TRACES = 20
OPS_PER_TRACE = 120


def vllm_env_dir() -> Path:
    """Where ``vllm-env`` puts its venvs: ``$PREFIXLAB_VLLM_ENV_DIR`` or ``~/.cache/prefixlab-vllm``."""
    root = os.environ.get("PREFIXLAB_VLLM_ENV_DIR")
    return Path(root).expanduser() if root else Path.home() / ".cache" / "prefixlab-vllm"


def core_python(wheel: str) -> Path:
    return vllm_env_dir() / f"core-{wheel}" / "bin" / "python"


def run_differential(venvs: VenvRunners, version: str, *, traces: int = NUM_TRACES, seed: int = 0) -> dict:
    wheel = VLLM_VERSIONS[version].wheel
    python = core_python(wheel)
    if not python.exists():
        pytest.skip(f"no vLLM {wheel} core venv at {python.parent.parent} "
                    f"(build it with `vllm-env core {wheel}`, or set PREFIXLAB_VLLM_ENV_DIR)")
    proc = venvs.run(python, "tests.vllm.differential", "--version", version,
                     "--traces", str(traces), "--ops", str(OPS_PER_TRACE), "--seed", str(seed), timeout=600)
    lines = [line for line in proc.stdout.splitlines() if line.startswith("{")]
    assert lines, f"no result from the runner (exit {proc.returncode}):\n{proc.stdout[-2000:]}\n{proc.stderr[-4000:]}"
    result = json.loads(lines[-1])
    assert proc.returncode == 0 and "error" not in result, result.get("error", proc.stderr[-4000:])
    return result


@pytest.mark.vllm
@pytest.mark.parametrize("version", list(VLLM_VERSIONS))
def test_cache_matches_real_vllm(vllm_venvs, version):
    result = run_differential(vllm_venvs, version)
    print(json.dumps(result), file=sys.stderr)
    assert result["vllm"] == VLLM_VERSIONS[version].wheel
    assert result["traces"] == NUM_TRACES and result["operations"] == NUM_TRACES * OPS_PER_TRACE
    # The traces really exercised what the versions differ on.
    assert result["caching_off_traces"] > 0 and result["watermark_traces"] > 0
    assert min(result["lora_requests"], result["salted_requests"], result["prompt_logprob_requests"]) > 0
    assert result["hit_tokens"] > 0 and result["evictions"] > 0 and result["resets"] > 0 and result["events"] > 0
    if VLLM_VERSIONS[version].watermark:
        assert result["watermark_refusals"] > 0
    # Ours set to any other version differs from this vLLM somewhere.
    assert set(result["controls"]) == set(VLLM_VERSIONS) - {version}
