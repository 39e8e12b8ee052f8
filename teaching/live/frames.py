"""One KV-event frame as it travels, and the JSON-lines recording format.

On the wire a frame is three ZMQ parts: the topic, an 8-byte big-endian sequence number and the
msgpack payload (a ``KVEventBatch``). A recording stores one frame per line as
``{"topic": ..., "seq": ..., "payload_b64": ...}`` (the format of the shipped vLLM recordings), plus
an optional ``"server"`` naming the replica when several are recorded into one file.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from engine.errors import PrefixLabError
from engine.kv_events import SEQ_BYTES, decode_seq

#: A recording bigger than this is refused rather than read into memory.
MAX_RECORDING_BYTES = 64 * 2**20


class RecordingError(PrefixLabError):
    """A recording (or a frame) that cannot be read; the message says which line and why."""


@dataclass(frozen=True)
class Frame:
    """One published batch: ``seq`` orders batches of one publisher; ``server`` names the replica."""

    topic: str
    seq: int
    payload: bytes
    server: str = ""


def seq_from_bytes(data: bytes) -> int:
    """The sequence-number frame, checked: a frame of another length is not vLLM's."""
    if len(data) != SEQ_BYTES:
        raise RecordingError(f"a sequence number is {SEQ_BYTES} bytes, got {len(data)}")
    return decode_seq(data)


def frame_from_parts(parts: list[bytes], server: str = "") -> Frame:
    """A frame from the three parts a SUB socket (or the replay socket, minus its envelope) gives."""
    if len(parts) != 3:
        raise RecordingError(f"a KV-event frame has 3 parts (topic, seq, payload), got {len(parts)}")
    topic, seq, payload = parts
    return Frame(topic.decode("utf-8", errors="replace"), seq_from_bytes(seq), payload, server)


def frame_to_json(frame: Frame) -> str:
    record: dict[str, object] = {"topic": frame.topic, "seq": frame.seq,
                                 "payload_b64": base64.b64encode(frame.payload).decode("ascii")}
    if frame.server:
        record["server"] = frame.server
    return json.dumps(record)


def frame_from_json(line: str, where: str = "line") -> Frame:
    try:
        record = json.loads(line)
        return Frame(str(record.get("topic", "")), int(record["seq"]),
                     base64.b64decode(record["payload_b64"], validate=True), str(record.get("server", "")))
    except (ValueError, KeyError, TypeError, binascii.Error) as exc:
        raise RecordingError(f"{where}: not a recorded frame ({type(exc).__name__}: {exc})") from None


def parse_recording(text: str, name: str = "recording") -> list[Frame]:
    """Every frame of a recording's text, in file order; blank lines are skipped."""
    if len(text) > MAX_RECORDING_BYTES:
        raise RecordingError(f"{name} is larger than {MAX_RECORDING_BYTES // 2**20} MiB")
    return [frame_from_json(line, f"{name} line {number}")
            for number, line in enumerate(text.splitlines(), 1) if line.strip()]


def read_recording(path: str | Path) -> list[Frame]:
    path = Path(path)
    if path.stat().st_size > MAX_RECORDING_BYTES:
        raise RecordingError(f"{path.name} is larger than {MAX_RECORDING_BYTES // 2**20} MiB")
    return parse_recording(path.read_text(encoding="utf-8"), path.name)


def write_recording(frames: Iterable[Frame], out: IO[str]) -> int:
    count = 0
    for frame in frames:
        out.write(frame_to_json(frame) + "\n")
        count += 1
    return count


def iter_servers(frames: Iterable[Frame]) -> Iterator[str]:
    """The replica names in a recording, first appearance first."""
    seen: set[str] = set()
    for frame in frames:
        if frame.server not in seen:
            seen.add(frame.server)
            yield frame.server
