"""Read a Mooncake-format trace: one JSON object per line, validated line by line.

Each line is a request: ``timestamp`` (arrival, ms), ``input_length`` and ``output_length``
(tokens) and ``hash_ids``, the prompt as a chain of 512-token blocks, each named by an id
(the text itself is withheld). Equal ids at equal positions mean a shared prefix.

A trace is user input that turns into work, so it is bounded (file size, requests, blocks
per request) and every bad line is reported with its number and what is wrong, instead of
a traceback.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Annotated

import msgspec

from engine.errors import PrefixLabError

#: Tokens per block in the Mooncake traces: ``hash_ids`` name blocks of this many tokens.
TRACE_BLOCK_SIZE = 512
#: Largest trace file accepted (the full conversation trace is ~3 MB).
MAX_TRACE_BYTES = 64 * 1024 * 1024
#: Most requests in one trace.
MAX_REQUESTS = 200_000
#: Most blocks in one request (1M tokens).
MAX_BLOCKS_PER_REQUEST = 2048
#: Bad lines listed in one error message (the count says how many more there were).
MAX_ERRORS_SHOWN = 10

NonNegInt = Annotated[int, msgspec.Meta(ge=0)]


class TraceError(PrefixLabError, ValueError):
    """A trace that cannot be read: too big, or lines that are not valid requests."""


class TraceRecord(msgspec.Struct, forbid_unknown_fields=False, frozen=True):
    """One line of a Mooncake trace, exactly as in the file."""

    timestamp: Annotated[float, msgspec.Meta(ge=0)]
    input_length: Annotated[int, msgspec.Meta(ge=1)]
    output_length: NonNegInt
    hash_ids: Annotated[list[NonNegInt], msgspec.Meta(min_length=1, max_length=MAX_BLOCKS_PER_REQUEST)]


@dataclass(frozen=True)
class Trace:
    """A validated trace, in arrival order (stable sort by timestamp)."""

    name: str
    records: tuple[TraceRecord, ...]

    def __len__(self) -> int:
        return len(self.records)

    @property
    def num_blocks(self) -> int:
        """Block lookups the trace asks for (every ``hash_id`` of every request)."""
        return sum(len(r.hash_ids) for r in self.records)

    @property
    def num_input_tokens(self) -> int:
        return sum(r.input_length for r in self.records)

    def head(self, n: int) -> Trace:
        """The first ``n`` requests (for quick looks at a long trace)."""
        return Trace(f"{self.name} (first {n})", self.records[:n])


_decoder = msgspec.json.Decoder(TraceRecord)


def _check(record: TraceRecord) -> str | None:
    """What is wrong with a well-typed record, or None."""
    expected = -(-record.input_length // TRACE_BLOCK_SIZE)
    if len(record.hash_ids) != expected:
        return (f"{len(record.hash_ids)} hash_ids for input_length {record.input_length}; "
                f"blocks of {TRACE_BLOCK_SIZE} tokens need {expected}")
    return None


def parse_trace(data: bytes | str, name: str = "trace") -> Trace:
    """Validate every line of a trace; raise :class:`TraceError` listing the bad ones."""
    raw = data.encode() if isinstance(data, str) else data
    if len(raw) > MAX_TRACE_BYTES:
        raise TraceError(f"{name} is {len(raw) / 2**20:.1f} MiB; the limit is {MAX_TRACE_BYTES // 2**20} MiB.")
    records: list[TraceRecord] = []
    errors: list[str] = []
    for line_no, line in enumerate(raw.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            record = _decoder.decode(line)
        except msgspec.ValidationError as exc:
            errors.append(f"line {line_no}: {exc}")
            continue
        except msgspec.DecodeError as exc:
            errors.append(f"line {line_no}: not a JSON object ({exc})")
            continue
        problem = _check(record)
        if problem:
            errors.append(f"line {line_no}: {problem}")
            continue
        records.append(record)
        if len(records) > MAX_REQUESTS:
            raise TraceError(f"{name} has more than {MAX_REQUESTS:,} requests; cut it into smaller files.")
    if errors:
        shown = "\n".join(errors[:MAX_ERRORS_SHOWN])
        more = f"\n... and {len(errors) - MAX_ERRORS_SHOWN} more bad lines" if len(errors) > MAX_ERRORS_SHOWN else ""
        raise TraceError(f"{name}: {len(errors)} bad line(s); each line must be a JSON object with "
                         f"timestamp, input_length, output_length and hash_ids.\n{shown}{more}")
    if not records:
        raise TraceError(f"{name} has no requests.")
    records.sort(key=lambda r: r.timestamp)  # stable: equal timestamps keep file order
    return Trace(name, tuple(records))


def load_trace(path: str | Path) -> Trace:
    """Read and validate a trace file (size checked before reading)."""
    path = Path(path)
    try:
        size = path.stat().st_size
    except OSError as exc:
        raise TraceError(f"cannot read {str(path)!r}: {exc.strerror}") from None
    if size > MAX_TRACE_BYTES:
        raise TraceError(f"{path.name} is {size / 2**20:.1f} MiB; the limit is {MAX_TRACE_BYTES // 2**20} MiB.")
    if path.is_dir():
        raise TraceError(f"{str(path)!r} is a folder, not a trace file.")
    return parse_trace(path.read_bytes(), path.name)
