"""``prefixlab serve``: one engine for the whole room behind an OpenAI-compatible HTTP API.

Module map (read in this order):

* ``config``       server settings: classroom limits, keys, and vLLM's ``--kv-events-config``
* ``protocol``     the OpenAI request/response bodies and the error body
* ``limits``       per-client concurrency quota (429 + Retry-After) and round-robin admission
* ``engine_loop``  the one thread that owns the engine: admits, steps, hands tokens back
* ``kv_publisher`` vLLM's KV events over ZMQ (PUB + ROUTER replay)
* ``metrics``      Prometheus text with vLLM's metric names
* ``app``          the FastAPI routes
* ``serve``        builds the engine, the publisher and the app, and runs them under uvicorn

Nothing here imports FastAPI or ZMQ at ``import engine`` time: only ``prefixlab serve`` does.
"""
