"""Widget state that survives page switches and fragment reruns.

Streamlit forgets a widget's state when a run does not draw the widget (another page, or
a fragment rerun). So the value lives under a plain key (``name``), and the widget uses a
mirror key (``_w_name``) seeded from it on every draw and copied back on change.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

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


def bind(obj: object, name: str, prefix: str, then: Callable[[], None] | None = None) -> dict[str, Any]:
    """Widget keyword arguments for field ``name`` of a page session ``obj``: the widget's key (seeded
    from the field on every draw) and an on_change that copies its value back, then calls ``then``."""
    key = f"_w_{prefix}_{name}"
    st.session_state[key] = getattr(obj, name)

    def callback() -> None:
        setattr(obj, name, st.session_state[key])
        if then is not None:
            then()

    return {"key": key, "on_change": callback}


def pull(obj: object, prefix: str, names: Iterable[str]) -> None:
    """Copy bound widgets' values into ``obj`` now: a click right after typing may run before the
    text box's own on_change has."""
    for name in names:
        key = f"_w_{prefix}_{name}"
        if key in st.session_state:
            setattr(obj, name, st.session_state[key])
