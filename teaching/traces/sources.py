"""Where traces come from: the sample shipped in the repository, and the full traces beside it.

The full Mooncake traces are not in the repository; a checkout keeps ``shared/`` next to
itself (``../shared/data/traces/``), or ``PREFIXLAB_TRACES_DIR`` names another folder.
"""

from __future__ import annotations

import os
import sysconfig
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
#: Where ``pip install .`` puts the sample (pyproject's data-files); a checkout has it under ROOT.
INSTALLED_SAMPLE = Path(sysconfig.get_path("data")) / "share" / "prefixlab" / "data" / "traces" / "sample.jsonl"
_CHECKOUT_SAMPLE = ROOT / "data" / "traces" / "sample.jsonl"
SAMPLE_TRACE = INSTALLED_SAMPLE if not _CHECKOUT_SAMPLE.exists() and INSTALLED_SAMPLE.exists() else _CHECKOUT_SAMPLE
#: The full conversation trace's file name (12,031 requests, one hour of a chat service).
CONVERSATION = "conversation_trace.jsonl"


def shared_traces_dir() -> Path:
    return Path(os.environ.get("PREFIXLAB_TRACES_DIR") or ROOT.parent / "shared" / "data" / "traces")


def available_traces() -> dict[str, Path]:
    """Label -> file: the sample always, then every full trace found beside the repository."""
    found = {"sample (first 500 requests of the conversation trace)": SAMPLE_TRACE}
    folder = shared_traces_dir()
    if folder.is_dir():
        for path in sorted(folder.glob("*.jsonl")):
            found[f"{path.stem} (full)"] = path
    return found
