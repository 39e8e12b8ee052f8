"""Process-wide knobs of the host, set by one explicit call that entry points make before torch loads.

Importing a PrefixLab module changes no environment: a notebook, a test or a library user gets the
process they started. The command line, the app and the benchmarks call :func:`tune_host` first.
"""

from __future__ import annotations

import os
from collections.abc import MutableMapping

from engine.config import fixed_num_threads


def machine_is_busy() -> bool:
    """More runnable processes than cores right now (1-minute load average)."""
    try:
        return os.getloadavg()[0] >= (os.cpu_count() or 1)
    except OSError:
        return False


def tune_host(env: MutableMapping[str, str] = os.environ, busy: bool | None = None) -> None:
    """Choose OpenMP's wait policy for this process (only takes effect if torch is not imported yet).

    OpenMP threads that finish early spin while waiting for the others. On an idle machine that is
    the fast choice (a cached-prefix step took 117 ms spinning vs 170 ms sleeping on 2 cores). On a
    busy one a spinning thread steals the core its partner needs and small matmuls, like a decode
    step's, get 10-50x slower; sleeping then wins. So: sleep only when the machine is already busy.
    A process whose thread count is fixed (``prefixlab serve --threads``, ``PREFIXLAB_NUM_THREADS``)
    was given its cores, as vLLM's thread binding takes them: it spins, whatever the load when it
    starts (which, on a machine that just ran another server, says little about the next hour).
    A value the user set is kept.
    """
    if busy is None:
        busy = machine_is_busy() and fixed_num_threads(env) is None
    if busy:
        env.setdefault("OMP_WAIT_POLICY", "PASSIVE")
