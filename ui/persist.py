"""Widget state that survives page switches and fragment reruns.

Streamlit forgets a widget's state when a run does not draw the widget (another page, or
a fragment rerun). So the value lives under a plain key (``name``), and the widget uses a
mirror key (``_w_name``) seeded from it on every draw and copied back on change.
"""

from __future__ import annotations

from collections.abc import Callable

import streamlit as st


def mirror(name: str) -> str:
    """Widget key for durable state ``name``: seeded from it on every render."""
    st.session_state["_w_" + name] = st.session_state[name]
    return "_w_" + name


def copy_back(name: str) -> Callable[[], None]:
    """on_change callback storing the widget's value in the durable key."""

    def callback() -> None:
        st.session_state[name] = st.session_state["_w_" + name]

    return callback
