"""Continuous batching, the app's side: many requests decoded together in one context (`roofline serve`).

The engine itself (`app.engine.llama.batch`, run as `python -m app.engine.llama.batch`) keeps up to N sequences
in one context, one seq_id each, and advances all of them with one llama_decode per step; `client` (no
llama_cpp) starts that process, streams its events and restarts it if it dies; `messages` are the extra
protocol events; `sweep` measures decode speed against the number of streams through the client.
"""
