"""Random traces through the whole engine (simulator back end) keep every cache invariant."""

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine import EngineConfig, LLMEngine, SamplingParams
from engine.errors import InvalidRequestError
from tests.unit.invariants import check_invariants, check_timeline_matches

PREFIXES = [list(range(0, 12)), list(range(100, 108)), [7] * 9]

arrive = st.tuples(
    st.just("arrive"),
    st.sampled_from(range(len(PREFIXES) + 1)),  # which shared prefix (last = none)
    st.integers(0, 6),  # how much of it
    st.lists(st.integers(0, 40), min_size=0, max_size=10),  # a distinct suffix
    st.integers(1, 6),  # max_tokens
    st.sampled_from([None, "salt-a"]),
)
op = st.one_of(
    arrive,
    st.tuples(st.just("step"), st.integers(1, 4)),
    st.tuples(st.just("abort"), st.integers(0, 50)),
    st.tuples(st.just("reset")),
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    ops=st.lists(op, min_size=1, max_size=40),
    num_blocks=st.integers(4, 14),
    block_size=st.sampled_from([1, 2, 4]),
    policy=st.sampled_from(["vllm", "classic"]),
    caching=st.booleans(),
    budget=st.sampled_from([3, 8, 64]),
)
def test_random_traces_keep_invariants(ops, num_blocks, block_size, policy, caching, budget):
    engine = LLMEngine(
        EngineConfig(
            backend="simulator", num_blocks=num_blocks, block_size=block_size, vllm_version=policy,
            enable_prefix_caching=caching, max_num_batched_tokens=budget, max_num_seqs=4,
        )
    )
    m = engine.kv_cache_manager
    ids: list[str] = []
    for operation in ops:
        kind = operation[0]
        if kind == "arrive":
            _, which, cut, suffix, max_tokens, salt = operation
            prefix = PREFIXES[which][: cut * 2] if which < len(PREFIXES) else []
            prompt = prefix + suffix or [1]
            try:
                ids.append(engine.add_request(prompt, SamplingParams(max_tokens=max_tokens), cache_salt=salt))
            except InvalidRequestError:
                pass  # longer than the whole pool: rejected up front, nothing changed
        elif kind == "step":
            for _ in range(operation[1]):
                if engine.has_unfinished_requests():
                    engine.step()
                    check_invariants(m)
        elif kind == "abort" and ids:
            rid = ids[operation[1] % len(ids)]
            if not engine.get_request(rid).is_finished:
                engine.abort_request(rid)
        elif kind == "reset":
            idle = not m.req_to_blocks
            assert engine.reset_prefix_cache() is idle
        check_invariants(m)
    while engine.has_unfinished_requests():
        engine.step()
        check_invariants(m)
    assert m.usage == 0.0
    check_timeline_matches(m)
    for rid in ids:
        req = engine.get_request(rid)
        assert req.is_finished
        if req.status.name == "FINISHED_LENGTH":
            assert req.num_output_tokens == req.sampling_params.max_tokens
