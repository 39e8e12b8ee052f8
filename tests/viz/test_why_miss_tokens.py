"""token_blocks_figure and token_blocks_html: tokens as blocks, coloured by state, with per-block hash labels."""

from __future__ import annotations

import re

import pytest

from viz.theme import OUTLINES, STATE_COLORS, state_tag
from viz.tokens import TOKENS_CSS, token_blocks_figure, token_blocks_html

WORDS = "the cat sat on the mat and then the dog ran".split()  # 11 tokens: 2 full blocks + 3 of 4


def token_rects(fig, n: int):  # type: ignore[no-untyped-def]
    return fig.layout.shapes[:n]


def test_cells_take_their_blocks_colour() -> None:
    fig = token_blocks_figure(WORDS, 4, ["hit", "computed", "partial"], ["aaaa1111", "bbbb2222", None])
    cells = token_rects(fig, len(WORDS))
    assert [c.fillcolor for c in cells] == (
        [STATE_COLORS["hit"]] * 4 + [STATE_COLORS["computed"]] * 4 + [STATE_COLORS["partial"]] * 3
    )
    outlines = fig.layout.shapes[len(WORDS):]
    assert len(outlines) == 3 and outlines[2].line.dash == "dot" and outlines[0].line.dash == "solid"


def test_token_texts_and_block_labels() -> None:
    fig = token_blocks_figure(WORDS, 4, ["hit", "computed", "partial"], ["aaaa1111", "bbbb2222", None],
                              hover_hashes=["aaaa1111" * 8, "bbbb2222" * 8, None])
    tokens, labels = fig.data[0], fig.data[1]
    assert list(tokens.text) == WORDS
    assert "token 9: 'dog' (block 2)" == tokens.hovertext[9]
    assert labels.text[0] == "<b>block 0</b> · aaaa1111"
    assert labels.text[2] == "<b>block 2</b> · no hash yet"
    assert "aaaa1111" * 8 in labels.hovertext[0] and "not full yet" in labels.hovertext[2]


def test_legend_lists_the_three_states_from_the_theme() -> None:
    fig = token_blocks_figure(WORDS, 4, ["hit", "computed", "partial"])
    legend = [t for t in fig.data if t.showlegend]
    assert [t.name for t in legend] == [state_tag(s) for s in ("hit", "computed", "partial")]
    assert [t.marker.color for t in legend] == [STATE_COLORS[s] for s in ("hit", "computed", "partial")]


def test_marked_token_is_outlined() -> None:
    fig = token_blocks_figure(WORDS, 4, ["hit", "computed", "partial"], marked_tokens={9})
    cells = token_rects(fig, len(WORDS))
    assert [c.line.dash == OUTLINES["differs"].dash for c in cells] == [i == 9 for i in range(len(WORDS))]


def test_long_tokens_are_clipped_but_hover_keeps_them() -> None:
    fig = token_blocks_figure(["extraordinarily"], 4, ["partial"])
    assert fig.data[0].text[0] == "extraor…" and "extraordinarily" in fig.data[0].hovertext[0]
    narrow = token_blocks_figure(["extraordinarily"], 2, ["partial"])  # narrow blocks, shorter clip
    assert narrow.data[0].text[0] == "extra…"


def test_rows_wrap_whole_blocks_with_fixed_axes() -> None:
    fig = token_blocks_figure([str(i) for i in range(40)], 4, ["computed"] * 10, tokens_per_row=16)
    ys = sorted(set(fig.data[0].y), reverse=True)
    assert len(ys) == 3  # 4 blocks per row: 4 + 4 + 2
    assert fig.layout.xaxis.fixedrange and fig.layout.yaxis.range[0] < min(ys)


@pytest.mark.parametrize(
    ("args", "message"),
    [((WORDS, 4, ["hit", "hit"]), "one state per block"),
     ((WORDS, 4, ["hit", "hit", "cached"]), "Unknown block state"),
     ((WORDS, 0, []), "block_size")],
)
def test_bad_arguments_raise_clear_errors(args: tuple, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        token_blocks_figure(*args)


def test_html_blocks_states_glyphs_hashes_and_the_marked_token() -> None:
    html = token_blocks_html(WORDS, 4, ["hit", "computed", "partial"], ["aaaa1111", "bbbb2222", None],
                             hover_hashes=["a" * 64, "b" * 64, None], marked_tokens={5}, title="r2")
    assert re.findall(r"data-state='(\w+)'", html) == ["hit", "computed", "partial"]
    assert "✓ <b>block 0</b> · <span class='h'>aaaa1111</span>" in html  # glyph as well as colour
    assert "◐ <b>block 2</b> · no hash yet" in html
    assert "hash " + "b" * 64 in html and "a" * 64 + "'" not in html.split("tb-label")[1]  # full hash on hover only
    assert len(re.findall(r"tb-tok marked", html)) == 1
    assert OUTLINES["differs"].css in TOKENS_CSS


def test_html_escapes_every_token() -> None:
    html = token_blocks_html(["<img src=x onerror=alert(1)>", "'", "&"], 4, ["computed"], title="<b>t</b>")
    assert "<img" not in html and "<b>t</b>" not in html
    assert "&lt;img" in html and "&amp;" in html and "&lt;b&gt;t" in html


def test_html_checks_states_like_the_figure() -> None:
    with pytest.raises(ValueError, match="one state per block"):
        token_blocks_html(WORDS, 4, ["hit"])
