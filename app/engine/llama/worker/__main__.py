"""`python -m app.engine.llama.worker`: the single-request engine process (see app.engine.llama.worker.process)."""

from __future__ import annotations

from app.engine.llama.worker.process import exit_now, main

if __name__ == "__main__":
    exit_now(main())
