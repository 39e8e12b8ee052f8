"""Figure builders: pure functions from engine state / events to Plotly figures.

Nothing here imports Streamlit or calls the engine, so every figure works in a notebook
(``fig = block_grid(snapshot); fig.show()``) and is testable as a plain function.
"""
