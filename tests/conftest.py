"""Settings every test folder shares."""

from __future__ import annotations

import os

import pytest

from bench.server_process import HTTP_PORTS, ZMQ_PORTS
from tests.ports import for_worker_spec


def pytest_configure(config: pytest.Config) -> None:
    """Servers the tests start through ``bench.server_process`` take this worker's own ports (see tests/ports.py).
    The xdist controller sets nothing: its workers start with its environment, and a value set there would
    give every worker the first worker's range."""
    if getattr(config.option, "numprocesses", None) and not hasattr(config, "workerinput"):
        return
    for variable, default in (HTTP_PORTS, ZMQ_PORTS):
        os.environ.setdefault(variable, for_worker_spec(default))
