"""Command line: ``prefixlab app|generate|serve|bench|replay|trace``.

``app`` starts the Streamlit app (what ``make run`` does).

``serve`` runs one shared engine behind an OpenAI-compatible HTTP API (``engine/server``).
``generate`` runs one prompt on the real model and prints the text and the request's metrics
(cached vs computed prefill tokens, TTFT, decode speed). ``bench`` runs the prefix-cache
benchmark (``bench/prefix_cache.py``); ``bench engine`` the engine-speed one (``bench/engine.py``). ``replay`` plays a scenario (a file in the format of
``docs/scenarios.md``, or a built-in one) on the simulator and prints every cache event in words.
``trace`` replays a production trace through the real prefix cache (``teaching/traces/command.py``).
``class`` starts K ``serve`` replicas behind vLLM's router, and the app wired to them (``prefixlab/classroom.py``).
"""

from __future__ import annotations

import argparse
import os
import sys

from engine.config import DEFAULT_MODEL, NUM_THREADS_VARIABLES
from engine.errors import ConfigError, PrefixLabError
from engine.runtime.host import tune_host
from engine.runtime.huge_pages import restart_on_huge_pages
from teaching.traces.command import add_trace_parser, run_trace


def progress(fraction: float, message: str) -> None:
    print(f"[{fraction:4.0%}] {message}", file=sys.stderr, flush=True)


def generate(args: argparse.Namespace) -> int:
    from engine import EngineConfig, LLMEngine, SamplingParams

    # The sampling settings first: a bad one is reported before the model takes seconds to load.
    params = SamplingParams(max_tokens=args.max_tokens, temperature=args.temperature, top_p=args.top_p,
                            top_k=args.top_k, seed=args.seed)
    engine = LLMEngine(EngineConfig(model=args.model, enable_prefix_caching=not args.no_cache), progress=progress)
    prompt = [{"role": "user", "content": args.prompt}] if args.chat else args.prompt
    output = engine.generate([prompt], params)[0]
    print(output.text)
    print(file=sys.stderr)
    print(f"finish: {output.finish_reason}", file=sys.stderr)
    assert output.metrics is not None, "generate() fills every output's metrics"
    for key, value in output.metrics.as_dict().items():
        shown = f"{value:.3f}" if isinstance(value, float) else value
        print(f"{key}: {shown}", file=sys.stderr)
    return 0


def serve(args: argparse.Namespace) -> int:
    from engine import EngineConfig
    from engine.server.config import KVEventsConfig, ServerConfig, ServerLimits
    from engine.server.serve import serve as run_server

    try:
        limits = ServerLimits(max_prompt_tokens=args.max_prompt_tokens, max_tokens=args.max_tokens_limit,
                              max_concurrent_per_client=args.max_concurrent_per_client,
                              request_timeout_s=args.request_timeout)
        config = ServerConfig(model=args.model, served_model_name=args.served_model_name or args.model, limits=limits,
                              kv_events=KVEventsConfig.from_json(args.kv_events_config),
                              student_keys=frozenset(args.api_key or ()), teacher_key=args.teacher_key,
                              cache_salt_policy=args.cache_salt_policy)
        if args.kv_offloading_backend != "native":
            raise ConfigError(f"--kv-offloading-backend {args.kv_offloading_backend!r}: only 'native' (vLLM's own "
                              "CPU offloading) is built in.")
        engine_config = EngineConfig(model=args.model, block_size=args.block_size, num_blocks=args.num_blocks,
                                     max_num_seqs=args.max_num_seqs, hash_algo=args.prefix_caching_hash_algo,
                                     kv_offloading_size=args.kv_offloading_size,
                                     kv_offloading_num_blocks=args.kv_offloading_num_blocks,
                                     kv_offloading_policy=args.kv_offloading_policy)
        config.kv_cache_metrics_sample = args.kv_cache_metrics_sample if args.kv_cache_metrics else None
    except PrefixLabError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    import importlib.util

    missing = [name for name in ("fastapi", "uvicorn") if importlib.util.find_spec(name) is None]
    if missing:
        print(f"error: `prefixlab serve` needs {' and '.join(missing)}: pip install 'prefixlab[server]'", file=sys.stderr)
        return 2
    return run_server(config, engine_config, args.host, args.port, progress=progress, executor=args.executor)


def read_scenario_file(path: str) -> str:
    """A scenario file's text, read no further than the size limit (``/dev/zero`` never ends)."""
    from teaching.limits import MAX_SCENARIO_CHARS, LimitError

    limit = 4 * MAX_SCENARIO_CHARS  # UTF-8 takes at most 4 bytes per character
    with open(path, "rb") as handle:
        data = handle.read(limit + 1)
    if len(data) > limit:
        raise LimitError(f"{path!r} is over {limit:,} bytes; a scenario may be at most {MAX_SCENARIO_CHARS:,} characters.")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise LimitError(f"{path!r} is not UTF-8 text (byte {exc.start} is {data[exc.start:exc.start + 1]!r}); "
                         "save the scenario as UTF-8.") from None


def replay(args: argparse.Namespace) -> int:
    from teaching.scenarios.describe import describe_event  # the CLI is a front end, like the app: same wording
    from teaching.scenarios.library import BUILTIN_SCENARIOS
    from teaching.scenarios.scenario import ScenarioError, run_scenario

    if args.scenario in BUILTIN_SCENARIOS:
        text = BUILTIN_SCENARIOS[args.scenario]
    else:
        try:
            text = read_scenario_file(args.scenario)
        except PrefixLabError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
        except OSError as exc:
            print(f"error: cannot read {args.scenario!r} ({exc.strerror}); built-in scenarios: "
                  f"{', '.join(BUILTIN_SCENARIOS)}", file=sys.stderr)
            return 2
    try:
        run = run_scenario(text, args.vllm_version)
    except ScenarioError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    for span in run.spans:
        print(f"line {span.action.line_no}: {span.action.source.strip()}" + (f"  ({span.note})" if span.note else ""))
        for event in run.events[span.start : span.end]:
            print(f"    {describe_event(event, run.token_text)}")
    final = run.timeline().state_at(len(run.events))
    stats = run.engine.kv_cache_manager.prefix_cache_stats
    print(f"\nfree queue (head -> tail): {final.free_queue}")
    print(f"evictions: {final.num_evictions}; prefix cache hit rate: {stats.hit_rate:.0%} "
          f"({stats.hits} of {stats.queries} prompt tokens)")
    return 0


def run_app(extra: list[str]) -> int:
    """``streamlit run app.py`` with the flags an offline classroom machine wants.

    Streamlit replaces this process (exec, not a child): the process the user started is the server,
    so Ctrl-C or SIGTERM reaches it directly and stops it, and the port is free when it is gone.
    """
    import os

    from prefixlab.app_files import app_root

    root = app_root()
    if root is None:
        print("error: the app's files (app.py, app_pages/) were not found; reinstall PrefixLab "
              "(pip install .) or run it from its repository", file=sys.stderr)
        return 2
    command = [sys.executable, "-m", "streamlit", "run", str(root / "app.py"), "--server.fileWatcherType", "none",
               "--server.headless", "true", "--browser.gatherUsageStats", "false", *extra]
    os.chdir(root)  # Streamlit reads .streamlit/config.toml from the working folder
    sys.stdout.flush()
    sys.stderr.flush()
    os.execv(sys.executable, command)
    return 0  # not reached: execv returns only by raising


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="prefixlab", description="PrefixLab from the command line.")
    commands = parser.add_subparsers(dest="command", required=True)

    app = commands.add_parser("app", help="start the Streamlit app (its options pass through to streamlit run)")
    app.set_defaults(passthrough=True)

    gen = commands.add_parser("generate", help="generate text for one prompt and print its metrics")
    gen.add_argument("--prompt", required=True)
    gen.add_argument("--chat", action="store_true", help="wrap the prompt as a user message in the chat template")
    gen.add_argument("--max-tokens", type=int, default=64)
    gen.add_argument("--model", default=DEFAULT_MODEL, help="built-in name, transformers folder or hub id")
    gen.add_argument("--temperature", type=float, default=0.0, help="0 = greedy")
    gen.add_argument("--top-p", type=float, default=1.0)
    gen.add_argument("--top-k", type=int, default=0)
    gen.add_argument("--seed", type=int, default=None)
    gen.add_argument("--no-cache", action="store_true", help="disable prefix caching")

    commands.add_parser("bench", help="prefix caching on vs off vs transformers (bench/prefix_cache.py); "
                        "'bench engine': speed vs the machine's limits and real vLLM (bench/engine.py); "
                        "their options (--quick, ...) pass through")

    from engine.config import EngineConfig
    from engine.server.config import DEFAULT_HOST, DEFAULT_PORT, ServerLimits
    from engine.vllm_versions import DEFAULT_VLLM_VERSION, LEGACY_VERSION_NAMES, VLLM_VERSIONS

    limits, engine_defaults = ServerLimits(), EngineConfig(backend="simulator")
    srv = commands.add_parser("serve", help="one shared engine for the room behind an OpenAI-compatible API")
    srv.add_argument("--host", default=DEFAULT_HOST, help="interface to listen on (default: all, as vLLM)")
    srv.add_argument("--port", type=int, default=DEFAULT_PORT)
    srv.add_argument("--model", default=DEFAULT_MODEL, help="built-in name, transformers folder or hub id")
    srv.add_argument("--served-model-name", default=None, help="the name clients send as `model` (default: --model)")
    srv.add_argument("--kv-events-config", default=None,
                     help='vLLM\'s JSON, e.g. \'{"enable_kv_cache_events": true, "endpoint": "tcp://*:5557", '
                          '"replay_endpoint": "tcp://*:5558"}\'')
    srv.add_argument("--api-key", action="append", help="a student key (repeat for each); with keys, every "
                     "request needs one")
    srv.add_argument("--teacher-key", default=None, help="the key that may also reset the prefix cache")
    srv.add_argument("--cache-salt-policy", choices=["bound", "isolated", "free"], default="bound",
                     help="bound (default): a student's cache_salt is bound to its key, so another key sending it "
                          "hits nothing; isolated: every student request is salted with its key; free: the salt "
                          "as sent, as vLLM does")
    srv.add_argument("--max-prompt-tokens", type=int, default=limits.max_prompt_tokens)
    srv.add_argument("--max-tokens-limit", type=int, default=limits.max_tokens, help="cap on a request's max_tokens")
    srv.add_argument("--max-concurrent-per-client", type=int, default=limits.max_concurrent_per_client,
                     help="requests in flight per key (or per address without keys); more get 429")
    srv.add_argument("--request-timeout", type=float, default=limits.request_timeout_s,
                     help="seconds before a request is stopped")
    srv.add_argument("--executor", choices=["worker", "in-process"], default="worker",
                     help="where forward passes run: a worker process beside the HTTP server (default), or in it")
    srv.add_argument("--threads", type=int, default=None,
                     help="give the forward passes this many cores: every pass uses N threads whatever the load, "
                          "as vLLM's VLLM_CPU_OMP_THREADS_BIND does (default: every core, one while the machine is busy)")
    srv.add_argument("--block-size", type=int, default=engine_defaults.block_size)
    srv.add_argument("--num-blocks", type=int, default=None, help="KV pool size (default: from the memory budget)")
    srv.add_argument("--prefix-caching-hash-algo", default=engine_defaults.hash_algo,
                     choices=["sha256", "sha256_cbor", "xxhash", "xxhash_cbor"],
                     help="vLLM's block-hash algorithm (a router that recomputes block hashes must use the same)")
    srv.add_argument("--max-num-seqs", type=int, default=engine_defaults.max_num_seqs,
                     help="requests batched together at most")
    srv.add_argument("--kv-offloading-size", type=float, default=None,
                     help="GiB of host memory for a second KV tier (vLLM's native CPU offloading); default: off")
    srv.add_argument("--kv-offloading-backend", default="native", help="vLLM's flag; only 'native' is built in")
    srv.add_argument("--kv-offloading-num-blocks", type=int, default=None,
                     help="the tier's size in blocks instead of GiB (small tiers for teaching)")
    srv.add_argument("--kv-offloading-policy", choices=["lru", "arc"], default="lru",
                     help="the tier's eviction policy (vLLM's OffloadingConnector `eviction_policy`)")
    srv.add_argument("--kv-cache-metrics", action="store_true",
                     help="export vLLM's block residency histograms (vllm:kv_block_lifetime_seconds, ...)")
    srv.add_argument("--kv-cache-metrics-sample", type=float, default=0.01,
                     help="fraction of blocks sampled for those histograms (vLLM's default 0.01)")

    rep = commands.add_parser("replay", help="play a scenario on the simulator and print every cache event in words")
    rep.add_argument("scenario", help="a scenario file (docs/scenarios.md), or a built-in name such as design-doc")
    rep.add_argument("--vllm-version", default=DEFAULT_VLLM_VERSION, choices=[*VLLM_VERSIONS, *LEGACY_VERSION_NAMES],
                     help=f"whose cache rules to follow (default {DEFAULT_VLLM_VERSION})")
    rep.add_argument("--policy", dest="vllm_version", choices=list(LEGACY_VERSION_NAMES),
                     help=argparse.SUPPRESS)  # the older spelling: vllm = the default, classic = 0.23

    add_trace_parser(commands)
    from prefixlab.classroom import add_class_parser, run_class

    add_class_parser(commands)

    args, rest = parser.parse_known_args(argv)
    if argv is None and (args.command == "serve" or rest[:1] == ["engine"]):
        restart_on_huge_pages()  # from the command line: the weights on huge pages, before anything loads
    if args.command == "app":
        return run_app(rest)
    if rest and args.command != "bench":
        parser.error(f"unrecognized arguments: {' '.join(rest)}")
    if args.command == "replay":
        return replay(args)  # simulator only: no torch, instant
    if args.command == "trace":
        return run_trace(args)  # no model either
    if args.command == "class":
        return run_class(args)  # child processes load the model
    from transformers.utils import logging as hf_logging  # keep the terminal for our own output

    if args.command == "serve" and args.threads:  # cores given to the server (its worker inherits this)
        os.environ[NUM_THREADS_VARIABLES[0]] = str(args.threads)
    tune_host()  # before torch loads: OpenMP's wait policy (engine.runtime.host)

    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()
    if args.command == "serve":
        return serve(args)
    if args.command == "bench":
        try:
            from bench import engine as engine_bench
            from bench import prefix_cache
        except ImportError:
            print("The benchmarks live in bench/: run them from the repository root.", file=sys.stderr)
            return 2
        if rest[:1] == ["engine"]:
            engine_bench.main(rest[1:])
            return 0
        sys.argv = ["bench.prefix_cache", *rest]
        prefix_cache.main()
        return 0
    try:
        return generate(args)
    except PrefixLabError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
