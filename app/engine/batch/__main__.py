"""`python -m app.engine.batch --parallel N`: the batch engine process (see app.engine.batch.engine).

The same process conventions as the single-request engine (app.engine.worker): JSON lines on stdin and on
a private copy of stdout, native prints sent to stderr, exit when the parent is gone.
"""

from __future__ import annotations

import argparse
import os
import queue
import sys
import threading
from typing import Any

from app.engine import worker
from app.engine.batch.engine import BatchEngine


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m app.engine.batch")
    parser.add_argument("--parallel", type=int, default=4)
    args = parser.parse_args(argv)
    worker._setup_streams()
    worker.lower_priority(os.environ.get("ROOFLINE_ENGINE_NICE"))
    threading.Thread(target=worker._watch_parent, name="parent-watch", daemon=True).start()
    inbox: queue.Queue[Any] = queue.Queue()
    engine = BatchEngine(inbox, args.parallel)
    threading.Thread(target=worker._stdin_reader, args=(inbox,), name="stdin", daemon=True).start()
    worker.announce_ready()
    engine.serve()
    engine.unload()
    return 0


if __name__ == "__main__":
    sys.exit(main())
