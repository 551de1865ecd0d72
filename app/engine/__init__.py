"""The engine: llama.cpp in a child process, behind a small typed protocol.

Only `app.engine.worker` (and modules it alone imports) may import `llama_cpp`; the client and protocol
are importable by the UI and CLI without loading native code.
"""
