"""Projector mode: one switch for every page, read in one place and drawn by one stylesheet.

``?projector=1`` in any page's URL (or the Projector toggle, drawn on every page) turns it on
for the whole session; ``?projector=0`` or the toggle turns it off. app.py calls
:func:`apply_projector` once per run, before the page: it reads the URL, keeps the URL saying
``projector=1`` while the mode is on (so a shared link opens projected), and puts the
stylesheet in the page. Pages only ask :func:`projector_on` when they lay out differently
(fewer columns, an HTML table instead of a canvas grid).
"""

from __future__ import annotations

from typing import Any

import streamlit as st

from ui.style import PROJECTOR_CSS

PARAM = "projector"  # the query parameter
KEY = "projector"  # the durable session key every page reads
TOGGLE_KEY = "_w_projector"
MIN_FONT_PX = 16  # the smallest type a projected page shows
TABLE_GROWTH = 1.9  # a projected Plotly table's height: room for each row to wrap onto two lines


def read_projector_param() -> bool:
    """The URL's word when it has one (``1`` on, ``0`` off), else the session's choice (off at first)."""
    value = st.query_params.get(PARAM)
    if value in ("0", "1"):
        st.session_state[KEY] = value == "1"
    st.session_state.setdefault(KEY, False)
    return bool(st.session_state[KEY])


def projector_on() -> bool:
    """Whether this run draws the projected layout (pages ask; only app.py reads the URL)."""
    return bool(st.session_state.get(KEY, False))


def sync_url() -> None:
    """Keep ``projector=1`` in the URL while the mode is on, and no projector parameter while off."""
    if projector_on():
        if st.query_params.get(PARAM) != "1":
            st.query_params[PARAM] = "1"
    elif PARAM in st.query_params:
        del st.query_params[PARAM]


def _on_toggle() -> None:
    st.session_state[KEY] = bool(st.session_state[TOGGLE_KEY])
    sync_url()


def projector_toggle() -> None:
    """The visible switch: top right of every page (placed by the stylesheet, out of the page flow)."""
    st.session_state[TOGGLE_KEY] = projector_on()
    with st.container(key="projector_switch"):
        st.toggle("Projector", key=TOGGLE_KEY, on_change=_on_toggle,
                  help="Large type and no sidebar, for a 1024x768 projector (or add ?projector=1 to the URL)")


def apply_projector() -> bool:
    """app.py, every run: read the URL, draw the toggle, and style the page when the mode is on."""
    on = read_projector_param()
    sync_url()
    projector_toggle()
    if on:
        st.markdown(PROJECTOR_CSS, unsafe_allow_html=True)
    return on


def projected_table(data: Any, **kwargs: Any) -> None:
    """A table: Streamlit's scrolling grid normally; projected, a plain HTML table that wraps to the
    page's width in large type, so no column hides in an inner scroll and every cell can be read."""
    if projector_on():
        st.html(f"<div class='pl-table'>{table_html(data)}</div>")
    else:
        st.dataframe(data, **kwargs)


def table_html(data: Any) -> str:
    """``data`` (rows, a DataFrame or a pandas Styler, whose cell styles are kept) as an HTML table, no index."""
    import pandas as pd
    from pandas.io.formats.style import Styler

    if isinstance(data, Styler):
        return data.hide(axis="index").to_html()
    frame = data if isinstance(data, pd.DataFrame) else pd.DataFrame(data)
    return frame.to_html(index=False, border=0, escape=True)


def _raise_fonts(node: Any, parent_key: str = "") -> None:
    """Every ``...font`` dict's ``size`` (a number or a list of them) raised to at least MIN_FONT_PX."""
    if isinstance(node, dict):
        if parent_key.endswith("font") and "size" in node:
            size = node["size"]
            if isinstance(size, (int, float)):
                node["size"] = max(size, MIN_FONT_PX)
            elif isinstance(size, (list, tuple)):
                node["size"] = [max(v, MIN_FONT_PX) if isinstance(v, (int, float)) else v for v in size]
        for key, value in node.items():
            _raise_fonts(value, key)
    elif isinstance(node, (list, tuple)):
        for item in node:
            _raise_fonts(item, parent_key)


def projected_figure(fig: Any) -> Any:
    """A copy of a Plotly figure with no text under MIN_FONT_PX (Plotly's own default is 12 px), laid
    out by Plotly at that size, so labels do not collide the way CSS-enlarged SVG text would."""
    import plotly.graph_objects as go

    spec = fig.to_dict()
    layout = spec.setdefault("layout", {})
    font = layout.setdefault("font", {})
    font["size"] = max(font.get("size") or 12, MIN_FONT_PX)
    _raise_fonts(spec)
    for name, axis in layout.items():
        if name.startswith(("xaxis", "yaxis")) and isinstance(axis, dict) and axis.get("type") == "log":
            # Plotly draws 10^n's exponent and the 2s and 5s between decades smaller than the axis font:
            # projected, a log axis is labelled at each decade in SI form (10k, 100k, 1M).
            axis.update(dtick=1, exponentformat="SI", minor=None)
    if any(trace.get("type") == "table" for trace in spec.get("data", [])) and layout.get("height"):
        # Plotly tables keep their pixel height and scroll inside it: at 16 px their cells wrap onto a
        # second line, so give them room for that instead of hiding the last rows in an inner scroll.
        layout["height"] = int(layout["height"] * TABLE_GROWTH)
    return go.Figure(spec)


def plotly_chart(fig: Any, **kwargs: Any) -> Any:
    """``st.plotly_chart``, with the figure's type raised to projector size when the mode is on."""
    return st.plotly_chart(projected_figure(fig) if projector_on() else fig, **kwargs)
