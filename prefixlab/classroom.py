"""``prefixlab class``: K ``prefixlab serve`` replicas, vLLM's router in front, and the app wired to them.

One command for the teacher: the replicas start on ``--port + k`` with KV events on ``5557 + k``
(replay ``5657 + k``), the router (``vllm-router``, optional extra ``class``) listens on
``--router-port`` with the chosen ``--policy``, and the Streamlit app starts with its Playground's
class-server mode pointed at the router and its Live page connected to every replica. Ctrl-C or
SIGTERM stops everything: each child runs in its own process group and is stopped with it.
``--tour`` first plays the routing tour (:mod:`teaching.live.routing_tour`): the same chats under
round robin, then kv_aware, from empty caches, while the Live page shows where each one went.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from types import FrameType

from engine.server.cluster import (
    POLICIES,
    ROUTER_PORT,
    Cluster,
    ClusterConfig,
    ClusterError,
    find_router,
    router_missing_message,
)
from teaching.live.routing_tour import TOUR_POLICIES, TourError, run_tour
from ui.class_config import CLASS_SERVER_ENV, LIVE_SERVERS_ENV

REPO = Path(__file__).resolve().parents[1]
APP_PORT = 8501


def add_class_parser(commands: argparse._SubParsersAction) -> None:
    cls = commands.add_parser("class", help="K replicas + vLLM's router + the app, wired together (Ctrl-C stops all)")
    cls.add_argument("--replicas", type=int, default=2, help="how many `prefixlab serve` replicas (default 2)")
    cls.add_argument("--policy", choices=list(POLICIES), default="kv_aware",
                     help="the router's policy: kv_aware follows the replicas' caches (default); round_robin and "
                          "consistent_hash ignore them")
    cls.add_argument("--host", default="127.0.0.1", help="listen address of replicas and router (0.0.0.0: the room)")
    cls.add_argument("--port", type=int, default=8100, help="replica k serves on PORT + k (default 8100)")
    cls.add_argument("--events-port", type=int, default=5557, help="replica k publishes KV events on this + k")
    cls.add_argument("--replay-port", type=int, default=5657, help="replica k answers replays on this + k")
    cls.add_argument("--router-port", type=int, default=ROUTER_PORT, help="where students send requests")
    cls.add_argument("--app-port", type=int, default=APP_PORT, help="the Streamlit app's port")
    cls.add_argument("--no-app", action="store_true", help="start replicas and router only")
    cls.add_argument("--model", default=None, help="built-in name, transformers folder or hub id (default: serve's)")
    cls.add_argument("--block-size", type=int, default=16, help="KV block size (the router is told the same)")
    cls.add_argument("--num-blocks", type=int, default=None, help="KV pool per replica (default: memory budget)")
    cls.add_argument("--log-dir", default=None, help="where each process's log goes (default: a temporary folder)")
    cls.add_argument("--tour", action="store_true",
                     help="once ready, send the same chats under round_robin then kv_aware from empty caches and say "
                          "where each landed (watch the Live page); then the class goes on under --policy")
    cls.add_argument("--tour-policies", nargs="+", choices=list(POLICIES), default=list(TOUR_POLICIES),
                     help="the policies the tour compares, in order (default: round_robin kv_aware)")
    cls.add_argument("--tour-delay", type=float, default=1.0, help="seconds between the tour's requests")


def live_servers_text(config: ClusterConfig) -> str:
    """The Live page's server lines, one per replica (``;``-separated for an environment variable)."""
    return ";".join(f"replica-{r.index} {r.events} {r.replay} {r.url}" for r in config.replica_list())


def app_command(port: int, host: str) -> list[str]:
    return [sys.executable, "-m", "streamlit", "run", str(REPO / "app.py"), "--server.port", str(port),
            "--server.address", host, "--server.fileWatcherType", "none", "--server.headless", "true",
            "--browser.gatherUsageStats", "false"]


class Stop(Exception):
    """SIGTERM, turned into an exception so the ``finally`` that stops the children runs."""


def on_sigterm(signum: int, frame: FrameType | None) -> None:
    raise Stop


def tour(cluster: Cluster, args: argparse.Namespace, binary: str, say: Callable[[str], None]) -> None:
    """The routing tour (:mod:`teaching.live.routing_tour`), then the router back on ``--policy``.

    At a terminal each pass waits for Enter, so the teacher can open the Live page and talk first."""
    pause = (lambda text: input(text)) if sys.stdin.isatty() else None
    run_tour(cluster, say, policies=args.tour_policies, delay_s=args.tour_delay, pause=pause, binary=binary)
    if cluster.config.policy != args.policy:
        cluster.switch_policy(args.policy, binary)
        say(f"Tour done; the router is back on {args.policy}.")
    else:
        say("Tour done.")


def run_class(args: argparse.Namespace) -> int:
    try:
        config = ClusterConfig(replicas=args.replicas, policy=args.policy, host=args.host, port=args.port,
                               events_port=args.events_port, replay_port=args.replay_port,
                               router_port=args.router_port, model=args.model, block_size=args.block_size,
                               num_blocks=args.num_blocks)
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    binary = find_router()
    if binary is None:
        print(f"error: {router_missing_message()}", file=sys.stderr)
        return 2
    log_dir = Path(args.log_dir) if args.log_dir else Path(tempfile.mkdtemp(prefix="prefixlab-class-"))
    log_dir.mkdir(parents=True, exist_ok=True)
    cluster = Cluster(config, log_dir)
    signal.signal(signal.SIGTERM, on_sigterm)
    say = lambda text: print(text, file=sys.stderr, flush=True)  # noqa: E731
    try:
        say(f"Starting {config.replicas} replicas on ports {config.port}-{config.port + config.replicas - 1} "
            f"(KV events {config.events_port}+k, replay {config.replay_port}+k); logs in {log_dir}")
        cluster.start_replicas(env={"PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))})
        cluster.start_router(binary)
        say(f"vLLM's router ({config.policy}) on {config.router_url}/v1; metrics on "
            f"http://{config.client_host}:{config.metrics_port}/metrics")
        if not args.no_app:
            env = {**os.environ, CLASS_SERVER_ENV: config.router_url, LIVE_SERVERS_ENV: live_servers_text(config)}
            cluster.spawn("app", app_command(args.app_port, args.host), env=env, cwd=REPO)
            say(f"The app on http://{config.client_host}:{args.app_port} (Playground -> class server: the router; "
                "Live: every replica)")
        if args.tour:
            tour(cluster, args, binary, say)
        say("Ready. Ctrl-C stops everything.")
        while True:
            gone = [name for name, process, _ in cluster.processes if process.poll() is not None]
            if gone:
                say(f"error: {', '.join(gone)} stopped; stopping the rest (logs in {log_dir})")
                return 1
            time.sleep(1.0)
    except (ClusterError, TourError) as exc:
        say(f"error: {exc}")
        return 1
    except (KeyboardInterrupt, Stop):
        say("Stopping the class...")
        return 0
    finally:
        cluster.stop()
