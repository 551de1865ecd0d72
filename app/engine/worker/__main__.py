"""`python -m app.engine.worker`: the single-request engine process (see app.engine.worker.process)."""

from __future__ import annotations

import sys

from app.engine.worker.process import main

if __name__ == "__main__":
    sys.exit(main())
