"""A window reduced to its Serve switch, in a process of its own, for tests that kill it: `python
serve_window.py MODEL [COMMAND_JSON]` starts ServeControl (the given command, else the real `roofline serve`)
on MODEL on a free port, prints `serving PID` once the server listens (PID: the server's), then waits to be
killed. No shutdown code runs on SIGKILL, which is the point."""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # run as a script: this checkout's app

from PySide6.QtCore import QCoreApplication

from app.ui.serve.control import ServeControl


def main() -> None:
    app = QCoreApplication([])
    command = json.loads(sys.argv[2]) if len(sys.argv) > 2 else None
    control = ServeControl(None, port=0, parallel=1, ctx=256, threads=1, command=command)
    control.state_changed.connect(lambda state: print(f"{state} {control.pid}", flush=True))
    control.died.connect(lambda why: print(f"died {why}", flush=True))
    problem = control.start(Path(sys.argv[1]))
    if problem:
        print(f"refused {problem}", flush=True)
        return
    app.exec()


if __name__ == "__main__":
    main()
