"""Entry point of the frozen app (PyInstaller): the same `main` as the `roofline` console script.

`roofline` with no arguments opens the window; `--engine-worker` / `--quantize` are the child-process roles
the app starts itself; `--self-test` checks the installation.
"""

import sys

from app.cli import main

if __name__ == "__main__":
    sys.exit(main())
