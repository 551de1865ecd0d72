"""`python -m app.engine.llama.worker`: the single-request engine process (see app.engine.llama.worker.process)."""

from __future__ import annotations

import sys

from app.engine.llama.worker.process import main

if __name__ == "__main__":
    sys.exit(main())
