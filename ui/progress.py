"""A Streamlit progress bar as the ``progress(fraction, message)`` callback the teaching layer takes."""

from __future__ import annotations

from collections.abc import Callable

from streamlit.delta_generator import DeltaGenerator


def progress_callback(bar: DeltaGenerator, prefix: str = "") -> Callable[[float, str], None]:
    """``progress(f, message)`` that moves ``bar`` (clamped to 1.0) and shows ``prefix + message``."""

    def progress(fraction: float, message: str) -> None:
        bar.progress(min(1.0, fraction), text=prefix + message)

    return progress
