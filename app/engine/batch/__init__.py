"""Continuous batching: many requests decoded together in one llama.cpp context (for `roofline serve`).

`engine` (the llama_cpp side, run as `python -m app.engine.batch`) keeps up to N sequences in one context,
one seq_id each, and advances all of them with one llama_decode per step; `client` (no llama_cpp) starts
that process, streams its events and restarts it if it dies; `messages` are the extra protocol events.
"""
