"""Projected Plotly figures: no text under 16 px, and log axes without small exponents or minor labels."""

from __future__ import annotations

import plotly.graph_objects as go

from ui.projector import MIN_FONT_PX, projected_figure, table_html


def test_every_font_is_raised_to_projector_size_and_larger_ones_stay() -> None:
    fig = go.Figure(go.Scatter(x=[1, 10, 100], y=[1, 2, 3], text=["a", "b", "c"], textfont={"size": [10, 20, 12]}))
    fig.update_layout(title={"text": "t", "font": {"size": 22}}, font={"size": 13})
    fig.add_annotation(text="note", font={"size": 11})
    fig.update_xaxes(type="log", tickfont={"size": 9})
    spec = projected_figure(fig).to_dict()
    layout = spec["layout"]
    assert layout["font"]["size"] == MIN_FONT_PX
    assert layout["title"]["font"]["size"] == 22
    assert layout["annotations"][0]["font"]["size"] == MIN_FONT_PX
    assert layout["xaxis"]["tickfont"]["size"] == MIN_FONT_PX
    assert list(spec["data"][0]["textfont"]["size"]) == [MIN_FONT_PX, 20, MIN_FONT_PX]
    assert layout["xaxis"]["exponentformat"] == "SI" and layout["xaxis"]["dtick"] == 1
    assert fig.layout.font.size == 13, "the original figure is left as it was"


def test_a_figure_without_any_font_gets_one() -> None:
    assert projected_figure(go.Figure()).layout.font.size == MIN_FONT_PX  # Plotly's default is 12 px


def test_tables_are_html_without_an_index_and_with_escaped_cells() -> None:
    html = table_html([{"block": 0, "same hash": "✓", "tokens": "<b>x</b>"}])
    assert "<th>same hash</th>" in html and "&lt;b&gt;x&lt;/b&gt;" in html
    assert "<th></th>" not in html  # no index column


def test_a_plotly_table_grows_so_its_wrapped_rows_do_not_scroll_inside_it() -> None:
    fig = go.Figure(go.Table(header={"values": ["hash"]}, cells={"values": [["a", "b"]]}))
    fig.update_layout(height=100)
    assert projected_figure(fig).layout.height > 100
