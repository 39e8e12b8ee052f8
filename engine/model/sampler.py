"""Turn each request's last-position logits into one token: greedy, or sampled with its own RNG.

Greedy (temperature 0) is a plain argmax, exactly what transformers' ``generate(do_sample=False)``
does, so the two must agree token for token. Sampling applies temperature, then top-k, then
top-p, and draws with a ``torch.Generator`` owned by the request: the same seed gives the same
text whatever else shares the batch.
"""

from __future__ import annotations

import hashlib

import torch

from engine.request import SamplingParams


def request_generator(request_id: str, params: SamplingParams, engine_seed: int) -> torch.Generator:
    """A private RNG: seeded by ``params.seed``, else derived from the engine seed and the request id."""
    if params.seed is not None:
        seed = params.seed
    else:
        digest = hashlib.blake2b(f"{engine_seed}/{request_id}".encode(), digest_size=8).digest()
        seed = int.from_bytes(digest, "little") & (2**63 - 1)
    generator = torch.Generator()  # CPU generator: same draws on any device
    generator.manual_seed(seed)
    return generator


def apply_top_k_top_p(logits: torch.Tensor, top_k: int, top_p: float) -> torch.Tensor:
    """Set logits outside the top-k, then outside the top-p nucleus, to -inf (1-D logits)."""
    if 0 < top_k < logits.shape[-1]:
        kth = torch.topk(logits, top_k).values[-1]
        logits = logits.masked_fill(logits < kth, float("-inf"))
    if top_p < 1.0:
        sorted_logits, order = torch.sort(logits, descending=True)
        probs = sorted_logits.softmax(-1)
        # Drop a token when the tokens before it already cover top_p; the first always stays.
        drop = (probs.cumsum(-1) - probs) > top_p
        logits = logits.clone()
        logits[order[drop]] = float("-inf")
    return logits


class Sampler:
    def __init__(self, engine_seed: int = 0) -> None:
        self.engine_seed = engine_seed
        self.generators: dict[str, torch.Generator] = {}

    def __call__(self, logits: torch.Tensor, request_ids: list[str], params: list[SamplingParams]) -> list[int]:
        """One token per row of ``logits`` (``[num_requests, vocab]``)."""
        logits = logits.float()
        tokens = logits.argmax(dim=-1).tolist()  # greedy rows are done; overwrite sampled ones
        for row, (request_id, sp) in enumerate(zip(request_ids, params)):
            if sp.greedy:
                continue
            if request_id not in self.generators:
                self.generators[request_id] = request_generator(request_id, sp, self.engine_seed)
            row_logits = apply_top_k_top_p(logits[row].cpu() / sp.temperature, sp.top_k, sp.top_p)
            probs = row_logits.softmax(-1)
            tokens[row] = int(torch.multinomial(probs, 1, generator=self.generators[request_id]))
        return tokens

    def forget(self, request_id: str) -> None:
        self.generators.pop(request_id, None)
