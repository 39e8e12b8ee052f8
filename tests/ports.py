"""Port ranges that parallel test workers never share.

``make test`` runs the slow tier in several pytest-xdist workers at once. A test that picks "the first
free port of 8200-8299" could pick the same port as a test in another worker that has not bound it
yet; so every fixed range a test folder owns is moved by :data:`WORKER_SHIFT` per worker. The shifted
ranges stay below Linux's ephemeral ports (32768 and up), where port-0 probes land.
"""

from __future__ import annotations

import os

#: How far each worker's ranges lie from the previous worker's (wider than every range tests use).
WORKER_SHIFT = 4_000


def worker_index() -> int:
    """0 outside xdist, else the worker's number (``gw2`` -> 2)."""
    name = os.environ.get("PYTEST_XDIST_WORKER", "gw0")
    return int(name.removeprefix("gw")) if name.removeprefix("gw").isdigit() else 0


def for_worker(ports: range) -> range:
    """``ports`` as this worker's own range."""
    shift = WORKER_SHIFT * worker_index()
    return range(ports.start + shift, ports.stop + shift, ports.step)


def for_worker_spec(spec: str) -> str:
    """A ``"first-last"`` range (as the benchmarks' ``PREFIXLAB_*_PORTS`` variables take it) for this worker."""
    first, last = (int(part) for part in spec.split("-"))
    shift = WORKER_SHIFT * worker_index()
    return f"{first + shift}-{last + shift}"
