"""`python -m app.engine.llama.batch --parallel N`: the batch engine process (see app.engine.llama.batch.engine).

The same process conventions as the single-request engine (app.engine.llama.worker): JSON lines on stdin and on
a private copy of stdout, native prints sent to stderr, exit when the parent is gone.
"""

from __future__ import annotations

import argparse
import os
import queue
import threading
from typing import Any

from app.engine.batch import messages
from app.engine.llama.batch.engine import BatchEngine
from app.engine.llama.worker import process


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m app.engine.llama.batch")
    parser.add_argument("--parallel", type=int, default=4)
    args = parser.parse_args(argv)
    process.setup_streams()
    process.lower_priority(os.environ.get("ROOFLINE_ENGINE_NICE"))
    threading.Thread(target=process.watch_parent, name="parent-watch", daemon=True).start()
    inbox: queue.Queue[Any] = queue.Queue()
    engine = BatchEngine(inbox, args.parallel)
    threading.Thread(target=process.stdin_reader, args=(inbox, messages.decode), name="stdin", daemon=True).start()
    process.announce_ready()
    engine.serve()
    engine.unload()
    return 0


if __name__ == "__main__":
    process.exit_now(main())
