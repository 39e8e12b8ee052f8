"""Scenarios: the plain-text script format, the built-in library, events in words, shareable links."""
