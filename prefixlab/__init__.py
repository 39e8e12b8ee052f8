"""The ``prefixlab`` command: the top layer, above the app, the server, the teaching layer and benchmarks."""
