"""The batch engine's llama.cpp side (`python -m app.engine.llama.batch`): many sequences in one context."""
