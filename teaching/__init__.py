"""PrefixLab's teaching layer: scenarios, lessons, explainers and page logic without widgets.

It imports :mod:`engine` (the serving engine) and never the reverse; figures (:mod:`viz`) and
the Streamlit pages (:mod:`ui`, ``app_pages``) sit on top of it.
"""
