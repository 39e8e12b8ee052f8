"""Hash chain and Why did it miss? with SmolLM2's own tokenizer (issue 21, item 4).

The word tokenizer drops spaces and knows no chat template, so a trailing space looked like
"the same tokens" and a chat's shared template prefix was invisible. With SmolLM2's tokenizer
the pages answer as vLLM sees the request. Loads the bundled model's tokenizer (marked slow).
"""

from __future__ import annotations

import pytest

from engine.errors import ConfigError
from teaching.pages.prefix_probe import RequestSpec
from teaching.pages.real_tokens import REAL, REAL_CHAT, WORDS, probe_with_tokenizer, smollm2_tokenizer
from teaching.pages.why_miss import explain

pytestmark = pytest.mark.slow

PROMPT = "Once upon a time a small cat found a box"


@pytest.fixture(scope="module")
def tokenizer():
    try:
        return smollm2_tokenizer()
    except ConfigError as exc:
        pytest.skip(str(exc))


def test_a_trailing_space_is_a_token_of_its_own(tokenizer) -> None:
    words = probe_with_tokenizer(RequestSpec(PROMPT), RequestSpec(PROMPT + " "), WORDS)
    real = probe_with_tokenizer(RequestSpec(PROMPT), RequestSpec(PROMPT + " "), REAL)
    assert words.first_diff_token is None  # the word tokenizer cannot see it...
    assert real.probe.num_tokens == real.cached.num_tokens + 1  # ...SmolLM2 adds a token
    assert real.first_diff_token == real.cached.num_tokens
    text = " ".join(explain(real).reasons)
    assert "same token ids" not in text and "identical" not in text
    assert "␣·" in text  # the extra token, shown as text and id


def test_tokens_are_shown_with_their_ids(tokenizer) -> None:
    real = probe_with_tokenizer(RequestSpec(PROMPT), RequestSpec(PROMPT), REAL)
    ids = real.cached.token_ids
    assert ids == tuple(tokenizer.encode(PROMPT))
    assert [t.rsplit("·", 1)[1] for t in real.cached.tokens_text] == [str(i) for i in ids]
    assert real.cached.tokens_text[1].startswith("␣upon")


def test_the_chat_template_is_a_shared_prefix(tokenizer) -> None:
    """Two different questions: no common first token as plain text, but as chat requests they share
    the template's opening (SmolLM2's default system prompt), so full blocks of it hit."""
    plain = probe_with_tokenizer(RequestSpec("What is a cache?"), RequestSpec("Why use blocks?"), REAL)
    chat = probe_with_tokenizer(RequestSpec("What is a cache?"), RequestSpec("Why use blocks?"), REAL_CHAT)
    assert plain.num_hit_blocks == 0
    assert chat.num_hit_blocks >= 4
    assert chat.cached.num_tokens > 2 * plain.cached.num_tokens
    assert any("im_start" in t for t in chat.cached.tokens_text)


def test_token_ids_typed_by_hand_need_the_word_or_id_mode(tokenizer) -> None:
    with pytest.raises(ConfigError, match="text"):
        probe_with_tokenizer(RequestSpec([1, 2, 3]), RequestSpec("a b"), REAL)
