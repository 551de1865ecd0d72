"""What the CLI does with an exception nobody expected: one line on the terminal naming a log file that
holds the traceback, so a user can report it and a script sees a plain error, never a wall of Python."""

from __future__ import annotations

import os
import shlex
import sys
import tempfile
import time
import traceback
from pathlib import Path

EXIT_INTERNAL = 1  # like any other failure; bad input (usage errors) is 2


def crash_log_dir() -> Path:
    """Where crash logs go: `logs` in the app's data folder (ROOFLINE_HOME/data/logs when that is set)."""
    from app.core.config import paths

    return paths.data_dir() / "logs"


def write_crash_log(exc: BaseException, argv: list[str]) -> Path | None:
    """Write the traceback and the command line; the log's path, or None when nowhere is writable."""
    import app

    stamp = time.strftime("%Y%m%d-%H%M%S")
    text = (f"roofline {app.__version__} crashed at {time.strftime('%Y-%m-%d %H:%M:%S')}\n"
            f"command: roofline {shlex.join(argv)}\npython: {sys.version.split()[0]} on {sys.platform}\n\n"
            + "".join(traceback.format_exception(exc)))
    candidates = []
    try:
        candidates.append(crash_log_dir())
    except OSError:
        pass  # the data folder itself is unusable: fall back to the temp folder
    candidates.append(Path(tempfile.gettempdir()))
    for directory in candidates:
        try:
            directory.mkdir(parents=True, exist_ok=True)
            path = directory / f"crash-{stamp}-{os.getpid()}.log"
            path.write_text(text, encoding="utf-8", errors="backslashreplace")
            return path
        except OSError:
            continue
    return None


def report_crash(exc: BaseException, argv: list[str]) -> int:
    log = write_crash_log(exc, argv)
    where = f"; details in {log}" if log else " (and no log could be written)"
    summary = str(exc).splitlines()[0] if str(exc) else ""
    print(f"roofline: internal error: {type(exc).__name__}{': ' + summary if summary else ''}{where}",
          file=sys.stderr)
    return EXIT_INTERNAL
