"""Watching a real serving engine: KV events off the wire, a cache picture built from them.

vLLM (and PrefixLab's own server) publish every change to the prefix cache as ZMQ frames. This
package subscribes to them (:mod:`.subscriber`), records and replays them (:mod:`.frames`), turns
them into a per-replica tree of cached blocks (:mod:`.state`), reads the server's Prometheus
metrics (:mod:`.metrics`) and sends requests through the OpenAI API (:mod:`.client`).
"""
