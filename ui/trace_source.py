"""Production traces' trace picker: the shipped sample, full traces beside the repository, or an upload.

Each choice becomes a :class:`~teaching.traces.replay.PreparedTrace` (its blocks hashed once),
kept per server in ``st.cache_resource``: many students replaying the sample share one.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import streamlit as st

from teaching.traces.loader import TraceError
from teaching.traces.page import MAX_UPLOAD_BYTES, load_file, load_upload
from teaching.traces.replay import PreparedTrace
from teaching.traces.sources import available_traces

UPLOAD = "Upload a trace file…"


@st.cache_resource(max_entries=4, show_spinner="Hashing the trace's blocks…")
def prepared_file(path: str, mtime: float) -> PreparedTrace:
    return PreparedTrace(load_file(Path(path)))


@st.cache_resource(max_entries=2, show_spinner="Hashing the trace's blocks…")
def prepared_upload(name: str, digest: str, _data: bytes) -> PreparedTrace:
    return PreparedTrace(load_upload(name, _data))


def choose_trace() -> tuple[str, PreparedTrace] | None:
    """The picked trace as (a key for its replays, the trace prepared), or None with the reason shown."""
    sources = available_traces()
    choice = st.selectbox("Trace", [*sources, UPLOAD], key="tr_source")
    try:
        if choice == UPLOAD:
            upload = st.file_uploader(f"A Mooncake-format JSON-lines file (at most {MAX_UPLOAD_BYTES // 2**20} MiB)",
                                      type=["jsonl", "json", "txt"], key="tr_upload")
            if upload is None:
                st.info("Each line: `timestamp` (ms), `input_length`, `output_length`, `hash_ids` (512-token blocks).")
                return None
            data = upload.getvalue()
            digest = hashlib.sha256(data).hexdigest()
            return f"upload:{digest}", prepared_upload(upload.name, digest, data)
        path = sources[choice]
        return f"file:{path}", prepared_file(str(path), path.stat().st_mtime)
    except (TraceError, OSError) as exc:
        st.error(f"This trace cannot be replayed. {exc}")
        return None
