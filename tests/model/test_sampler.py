"""Sampling: greedy is argmax, seeded sampling is reproducible, top-k/top-p cut the right tokens."""

import torch

from engine.model.sampler import Sampler, apply_top_k_top_p
from engine.request import SamplingParams


def test_greedy_is_argmax():
    logits = torch.tensor([[0.1, 3.0, 2.0], [5.0, -1.0, 4.9]])
    assert Sampler()(logits, ["a", "b"], [SamplingParams(), SamplingParams()]) == [1, 0]


def test_same_seed_same_tokens_different_seed_different_tokens():
    logits = torch.zeros(1, 1000)  # uniform: every draw is pure RNG
    def draw(seed, request_id="r"):
        sampler = Sampler()
        params = SamplingParams(temperature=1.0, seed=seed)
        return [sampler(logits, [request_id], [params])[0] for _ in range(8)]
    assert draw(1) == draw(1)
    assert draw(1) != draw(2)
    assert draw(None, "x") == draw(None, "x")  # no seed: derived from the engine seed and the id


def test_top_k_and_top_p_keep_the_right_tokens():
    logits = torch.tensor([1.0, 4.0, 3.0, 2.0])
    kept = torch.isfinite(apply_top_k_top_p(logits, top_k=2, top_p=1.0))
    assert kept.tolist() == [False, True, True, False]
    probs = logits.softmax(-1)  # ~[0.03, 0.64, 0.24, 0.09]
    assert probs[1] < 0.7 < probs[1] + probs[2]
    kept = torch.isfinite(apply_top_k_top_p(logits, top_k=0, top_p=0.7))
    assert kept.tolist() == [False, True, True, False]
    kept = torch.isfinite(apply_top_k_top_p(logits, top_k=0, top_p=0.01))
    assert kept.tolist() == [False, True, False, False]  # the top token always survives


def test_sampling_only_draws_from_the_nucleus():
    logits = torch.tensor([[1.0, 4.0, 3.0, 2.0]])
    sampler = Sampler()
    params = SamplingParams(temperature=2.0, top_k=2, seed=0)
    assert {sampler(logits, ["r"], [params])[0] for _ in range(50)} == {1, 2}
