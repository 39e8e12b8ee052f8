"""Streamlit glue shared by the pages: sidebar settings, URL state, the lab's session state.

Pure logic (no Streamlit) lives in :mod:`teaching.pages.lab` so it is testable as plain functions.
"""
