"""Streamlit glue shared by the pages: sidebar settings, URL state, the lab's session state.

Pure logic (no Streamlit) lives in :mod:`teaching.pages` so it is testable as plain functions; the pool,
free queue, block tables and hash table are drawn by one renderer, the browser player (:mod:`ui.lab_player`).
"""
