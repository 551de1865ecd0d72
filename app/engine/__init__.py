"""The engine: llama.cpp in a child process, behind a small typed protocol.

Only the engine's child processes import `llama_cpp`: the `app.engine.llama.worker` package, the batch engine
(`app.engine.llama.batch.engine`), the quantizer (`app.engine.llama.quantize`) and modules only they import (README's
Architecture section lists them; tests/test_architecture.py holds the list to it). The client and protocol
are importable by the UI and CLI without loading native code.
"""
