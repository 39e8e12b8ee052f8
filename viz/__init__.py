"""Figure builders: pure functions from engine state / events to Plotly figures.

Nothing here imports Streamlit or calls the engine, so every figure works in a notebook
(``fig = block_grid(snapshot); fig.show()``) and is testable as a plain function.
"""

from viz.block_tables import block_tables_figure
from viz.blocks import block_grid, block_state
from viz.free_queue import free_queue_figure, next_eviction
from viz.hash_table import hash_table_figure, hash_table_rows
from viz.legend import legend_html

__all__ = [
    "block_grid",
    "block_state",
    "block_tables_figure",
    "free_queue_figure",
    "hash_table_figure",
    "hash_table_rows",
    "legend_html",
    "next_eviction",
]
