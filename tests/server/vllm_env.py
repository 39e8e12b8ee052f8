"""Where the real vLLM venvs live (built outside the project), and a skip when one is missing."""

from __future__ import annotations

import base64
import json
import os
import subprocess
import textwrap
from pathlib import Path

import msgspec
import pytest

#: The venv whose vLLM recorded the KV-event fixtures (same major wire format).
VLLM_CPU_VENV = "cpu-0.32.0"


def vllm_python(venv: str = VLLM_CPU_VENV) -> Path:
    """The venv's python, or a pytest skip that says how to get it."""
    root = Path(os.environ.get("PREFIXLAB_VLLM_ENV_DIR", Path.home() / ".cache" / "prefixlab-vllm"))
    python = root / venv / "bin" / "python"
    if not python.exists():
        pytest.skip(f"vLLM venv {venv!r} not found under {root} (build it with the shared vllm-env tool)")
    return python


VLLM_DECODE = textwrap.dedent(
    """
    import base64, json, sys
    import msgspec
    from vllm.distributed.kv_events import KVEventBatch
    decoder = msgspec.msgpack.Decoder(KVEventBatch)
    out = []
    for line in sys.stdin:
        batch = decoder.decode(base64.b64decode(line))
        out.append([[type(e).__name__, msgspec.to_builtins(e)] for e in batch.events])
    print(json.dumps(out))
    """
)


def vllm_decode(payloads: list[bytes]) -> list:
    """Decode KV-event payloads with vLLM's own ``KVEventBatch`` (in the vLLM venv): events as builtins."""
    python = vllm_python()
    stdin = "\n".join(base64.b64encode(p).decode() for p in payloads) + "\n"
    done = subprocess.run([str(python), "-c", VLLM_DECODE], input=stdin, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def as_builtins(batches: list) -> list:
    """Our decoded batches in the same shape as :func:`vllm_decode`'s."""
    return [[[type(e).__name__, msgspec.to_builtins(e)] for e in batch.events] for batch in batches]
