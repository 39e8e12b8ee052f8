"""Several ``prefixlab serve`` replicas and vLLM's own router in front: start them, wait, stop them.

A class that shares one server shares one prefix cache; a class on K replicas has K caches, and the
router decides which cache each request meets. The router is vLLM's (``vllm-router``, a Rust binary
from the package index, installed in an environment of its own): with ``--policy kv_aware`` it
subscribes to every replica's KV events and asks a replica to *render* each request into token
ids (``/v1/*/render``), then sends the request where the longest prefix is cached.

Ports follow vLLM's data-parallel convention: replica ``k`` serves HTTP on ``port + k`` and publishes
KV events on ``events_port + k`` (replay on ``replay_port + k``). Every child runs in a process
group of its own, so :meth:`Cluster.stop` ends each one with whatever it started.

Two settings must agree between the replicas and the router, or ``kv_aware`` silently falls back
to load balancing on every request: the KV-event *topic* (the router listens on vLLM's default,
the empty topic) and the block size (``--kv-event-block-size``, 16 by default as in vLLM).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

ROUTER_ENV = "PREFIXLAB_VLLM_ROUTER"
#: Where the documented install puts the router: ``python3 -m venv ~/.cache/prefixlab-router``.
ROUTER_VENV = Path.home() / ".cache" / "prefixlab-router"
ROUTER_PACKAGE = "vllm-router"
POLICIES = ("round_robin", "consistent_hash", "kv_aware", "power_of_two", "random", "cache_aware")
EVENTS_PORT, REPLAY_PORT = 5557, 5657  # vLLM's KV-event default; replay a hundred above (one per replica)
ROUTER_PORT = 30000  # vllm-router's default
STOP_TIMEOUT_S = 15.0
#: A replica's per-client quota behind the router, which all requests share (the default 4 would 429).
ROUTED_CONCURRENCY = 256


class ClusterError(RuntimeError):
    """A replica or the router could not start; the message says which and shows its log's tail."""


def find_router() -> str | None:
    """The ``vllm-router`` executable: ``$PREFIXLAB_VLLM_ROUTER``, the documented venv, then ``PATH``."""
    given = os.environ.get(ROUTER_ENV)
    if given:
        return given if Path(given).exists() else None
    for candidate in (ROUTER_VENV / "bin" / "vllm-router", Path(sys.executable).parent / "vllm-router"):
        if candidate.exists():
            return str(candidate)
    return shutil.which("vllm-router")


def router_missing_message() -> str:
    return (f"vLLM's router is not installed: `python3 -m venv {ROUTER_VENV} && {ROUTER_VENV}/bin/pip install "
            f"{ROUTER_PACKAGE}` (or `pip install 'prefixlab[class]'`), or point {ROUTER_ENV} at the binary.")


@dataclass(frozen=True)
class Replica:
    index: int
    host: str  # where clients reach it (loopback when it listens everywhere)
    http_port: int
    events_port: int
    replay_port: int

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.http_port}"

    @property
    def events(self) -> str:
        return f"tcp://{self.host}:{self.events_port}"

    @property
    def replay(self) -> str:
        return f"tcp://{self.host}:{self.replay_port}"

    def kv_events_config(self) -> dict:
        """vLLM's ``--kv-events-config``: bound on every interface, vLLM's default (empty) topic."""
        return {"enable_kv_cache_events": True, "publisher": "zmq", "endpoint": f"tcp://*:{self.events_port}",
                "replay_endpoint": f"tcp://*:{self.replay_port}", "topic": ""}


@dataclass
class ClusterConfig:
    replicas: int = 2
    policy: str = "kv_aware"
    host: str = "127.0.0.1"  # the replicas' and the router's listen address
    port: int = 8000  # replica k serves on port + k
    events_port: int = EVENTS_PORT
    replay_port: int = REPLAY_PORT
    router_port: int = ROUTER_PORT
    router_metrics_port: int | None = None  # default: router_port + 1
    model: str | None = None
    served_model_name: str | None = None
    block_size: int = 16
    num_blocks: int | None = None
    serve_args: list[str] = field(default_factory=list)  # more `prefixlab serve` flags, for every replica

    def __post_init__(self) -> None:
        if not 1 <= self.replicas <= 16:
            raise ValueError(f"--replicas must be between 1 and 16, got {self.replicas}.")
        if self.policy not in POLICIES:
            raise ValueError(f"Unknown policy {self.policy!r}; choose one of {', '.join(POLICIES)}.")

    @property
    def client_host(self) -> str:
        return "127.0.0.1" if self.host in ("0.0.0.0", "::", "") else self.host

    @property
    def metrics_port(self) -> int:
        return self.router_metrics_port or self.router_port + 1

    @property
    def router_url(self) -> str:
        return f"http://{self.client_host}:{self.router_port}"

    def replica_list(self) -> list[Replica]:
        return [Replica(k, self.client_host, self.port + k, self.events_port + k, self.replay_port + k)
                for k in range(self.replicas)]


def serve_command(config: ClusterConfig, replica: Replica) -> list[str]:
    command = [sys.executable, "-m", "prefixlab", "serve", "--host", config.host, "--port", str(replica.http_port),
               "--block-size", str(config.block_size), "--kv-events-config", json.dumps(replica.kv_events_config())]
    if config.model:
        command += ["--model", config.model]
    if config.served_model_name:
        command += ["--served-model-name", config.served_model_name]
    if config.num_blocks:
        command += ["--num-blocks", str(config.num_blocks)]
    # Behind a router every request comes from the router's address: one "client" to the per-client quota.
    command += ["--max-concurrent-per-client", str(ROUTED_CONCURRENCY)]
    return command + list(config.serve_args)


def router_command(binary: str, config: ClusterConfig, model_name: str) -> list[str]:
    """vllm-router in front of the replicas; with kv_aware, one static KV-event source per replica."""
    replicas = config.replica_list()
    command = [binary, "--host", config.host, "--port", str(config.router_port), "--policy", config.policy,
               "--worker-urls", *[r.url for r in replicas],
               "--prometheus-host", config.client_host, "--prometheus-port", str(config.metrics_port)]
    if config.policy == "kv_aware":
        command += ["--kv-event-model", model_name, "--kv-event-block-size", str(config.block_size)]
        for r in replicas:
            command += ["--kv-event-source", f"{r.url}={r.events}", "--kv-event-replay-source", f"{r.url}={r.replay}"]
    return command


def wait_healthy(url: str, process: subprocess.Popen, log: Path, timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise ClusterError(f"{what} exited with {process.returncode}:\n{tail(log)}")
        try:
            with urllib.request.urlopen(url, timeout=2) as response:
                if response.status == 200:
                    return
        except (urllib.error.URLError, OSError):
            pass
        time.sleep(0.5)
    raise ClusterError(f"{what} did not answer {url} within {timeout_s:.0f} s:\n{tail(log)}")


def tail(log: Path, chars: int = 3000) -> str:
    return log.read_text(errors="replace")[-chars:] if log.exists() else "(no log)"


def stop_group(process: subprocess.Popen, timeout_s: float = STOP_TIMEOUT_S) -> None:
    """SIGTERM to the child's process group, SIGKILL to the group if it lingers."""
    if process.poll() is not None:
        return
    try:
        os.killpg(process.pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    try:
        process.wait(timeout_s)
    except subprocess.TimeoutExpired:
        try:
            os.killpg(process.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        process.wait(5)


@dataclass
class Cluster:
    """The running set: replica processes, the router process, and where their logs go."""

    config: ClusterConfig
    log_dir: Path
    processes: list[tuple[str, subprocess.Popen, Path]] = field(default_factory=list)

    def spawn(self, name: str, command: Sequence[str], env: dict[str, str] | None = None,
              cwd: Path | None = None) -> tuple[subprocess.Popen, Path]:
        log = self.log_dir / f"{name}.log"
        with open(log, "ab") as out:
            process = subprocess.Popen(list(command), stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                       env=env, cwd=cwd, start_new_session=True)  # its own process group
        self.processes.append((name, process, log))
        return process, log

    def start_replicas(self, timeout_s: float = 600.0, env: dict[str, str] | None = None) -> None:
        env = {**os.environ, "PYTHONUNBUFFERED": "1", **(env or {})}
        started = [(r, *self.spawn(f"replica-{r.index}", serve_command(self.config, r), env))
                   for r in self.config.replica_list()]
        for replica, process, log in started:
            wait_healthy(replica.url + "/health", process, log, timeout_s, f"replica {replica.index} ({replica.url})")

    def start_router(self, binary: str | None = None, timeout_s: float = 120.0) -> None:
        binary = binary or find_router()
        if binary is None:
            raise ClusterError(router_missing_message())
        name = self.config.served_model_name or self.config.model or self.served_model()
        process, log = self.spawn("router", router_command(binary, self.config, name))
        wait_healthy(self.config.router_url + "/health", process, log, timeout_s, f"vllm-router ({self.config.router_url})")

    def stop_router(self) -> None:
        """Stop the router (the replicas keep running, caches and all)."""
        for entry in [e for e in self.processes if e[0] == "router"]:
            stop_group(entry[1])
            self.processes.remove(entry)

    def switch_policy(self, policy: str, binary: str | None = None) -> None:
        """A fresh router with another policy in front of the same replicas (same port, empty KV index)."""
        if policy not in POLICIES:
            raise ValueError(f"Unknown policy {policy!r}; choose one of {', '.join(POLICIES)}.")
        self.stop_router()
        self.config.policy = policy
        self.start_router(binary)

    def reset_prefix_caches(self) -> None:
        """vLLM's ``POST /reset_prefix_cache`` on every replica: each publishes ``AllBlocksCleared``."""
        for replica in self.config.replica_list():
            request = urllib.request.Request(replica.url + "/reset_prefix_cache", method="POST", data=b"")
            with urllib.request.urlopen(request, timeout=60) as response:
                response.read()

    def served_model(self) -> str:
        """The name the replicas serve (the router's KV index is keyed by model)."""
        first = self.config.replica_list()[0]
        with urllib.request.urlopen(first.url + "/v1/models", timeout=10) as response:
            return str(json.load(response)["data"][0]["id"])

    def alive(self) -> list[str]:
        return [name for name, process, _ in self.processes if process.poll() is None]

    def stop(self) -> None:
        """Stop every child, router first (it stops sending), then the replicas; each with its group."""
        for _, process, _ in reversed(self.processes):
            stop_group(process)
