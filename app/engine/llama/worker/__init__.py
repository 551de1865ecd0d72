"""The engine process: owns llama.cpp and serves the protocol (`python -m app.engine.llama.worker`).

Commands arrive as JSON lines on stdin, events leave as JSON lines on a private copy of stdout; file
descriptor 1 itself is pointed at stderr so that anything native code prints can never corrupt the protocol
stream. One thread reads stdin into a queue, so a `cancel` is seen between two tokens while the main thread
generates. llama.cpp is not thread-safe: only the main thread touches it.

One module per job:
    stream.py   the protocol stream: send events, token bursts (no llama_cpp)
    process.py  the process around the engine: stdin reader, parent watch, priority, Ready, `main`
    engine.py   `Engine`: the command loop, KV and memory state, and the calls below
    load.py     load: GGUF pre-flight, llama.cpp construction with progress and cancel, Loaded
    generate.py one generation: prompt tokens, the decode loop, stop strings, phase metrics
    saved_kv.py a chat's KV cache written to disk after a reply and loaded back instead of a prefill
    bench.py    llama-bench style pp/tg measurement
    logs.py     llama.cpp's log lines (buffer sizes, the tail shown on errors), resident memory
    llama_templates.py  every `Llama()` built without llama-cpp-python compiling the GGUF's chat templates

This package's `__init__` imports nothing, so importing `stream` does not load llama.cpp.
"""

from __future__ import annotations


def main() -> int:
    """The engine process (the frozen app's `--engine-worker` role calls this)."""
    from app.engine.llama.worker.process import main as run

    return run()
