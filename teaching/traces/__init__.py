"""Production traces (Mooncake format) replayed through the real prefix cache.

``loader`` reads and validates a trace; ``trace_request`` turns each line into a request the
real :class:`~engine.kv_cache.KVCacheManager` accepts; ``policies`` builds a manager per
eviction policy; ``replay`` plays a trace through it; ``curve`` sweeps capacities; ``routing``
spreads a trace over several replicas.
"""
