import pytest

from engine.kv_cache import KVCacheManager
from engine.request import Request, SamplingParams


@pytest.fixture(autouse=True)
def _no_env_seed(monkeypatch):
    monkeypatch.delenv("PYTHONHASHSEED", raising=False)


def letters(text: str) -> list[int]:
    """Tokens as letters, as in vLLM's design doc: 'A'..'Z' -> 0..25, 'a'..'z' -> 100..125."""
    return [ord(c) - ord("A") if c.isupper() else 100 + ord(c) - ord("a") for c in text]


def make_request(rid: str, tokens, max_tokens: int = 16, **kw) -> Request:
    return Request(rid, list(tokens), SamplingParams(max_tokens=max_tokens), **kw)


def admit(m: KVCacheManager, req: Request):
    """What the scheduler does for a waiting request: look up, allocate, mark computed."""
    hits, num_hit = m.get_computed_blocks(req)
    new = m.allocate_slots(req, req.num_tokens - num_hit, num_hit, hits)
    assert new is not None
    req.num_computed_tokens = req.num_tokens
    return hits, new


def decode(m: KVCacheManager, req: Request, token: int):
    """Append a sampled token and allocate its slot (one decode step)."""
    req.append_output_token_ids(token)
    new = m.allocate_slots(req, 1)
    assert new is not None
    req.num_computed_tokens += 1
    return new
