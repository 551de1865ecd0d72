"""`roofline gui` (also what `roofline` with no sub-command runs): the desktop app.

Without a display, or without a system library Qt's xcb plugin needs, it says so in one line (naming the
packages to install) and points at the CLI (exit code 2) instead of letting Qt abort.
`--screenshot PATH --quit-after SECONDS` saves a PNG of the window and quits: handy for scripts and docs.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import time
from pathlib import Path
from typing import Any

NO_DISPLAY_EXIT = 2
STARTUP_WAIT_S = 120.0  # how long --quit-after waits past its time for a load still running


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("gui", help="open the desktop app (the default when no command is given)")
    p.add_argument("-m", "--model", help="GGUF file to load (default: the last model, else the embedded one)")
    p.add_argument("--screenshot", metavar="PATH", help="save a PNG of the window before quitting")
    p.add_argument("--quit-after", metavar="SECONDS", type=float,
                   help="quit after this many seconds, and once the startup load has settled "
                        "(with --screenshot: take it then)")
    p.set_defaults(func=run_gui)


def display_problem(env: dict[str, str] | None = None, platform: str = sys.platform) -> str | None:
    """Why Qt could not open a window here, or None. Only Linux/BSD need a display server variable."""
    env = dict(os.environ) if env is None else env
    qpa = env.get("QT_QPA_PLATFORM", "").split(":")[0].strip().lower()
    if qpa in ("offscreen", "minimal", "vnc", "eglfs", "linuxfb"):
        return None
    if not platform.startswith(("linux", "freebsd", "openbsd", "netbsd")):
        return None
    if qpa in ("", "xcb") and env.get("DISPLAY"):
        return None
    if qpa in ("", "wayland") and env.get("WAYLAND_DISPLAY"):
        return None
    if qpa == "xcb":
        return "QT_QPA_PLATFORM=xcb but DISPLAY is not set"
    if qpa == "wayland":
        return "QT_QPA_PLATFORM=wayland but WAYLAND_DISPLAY is not set"
    return "no display (neither DISPLAY nor WAYLAND_DISPLAY is set)"


def _quit_on_signals(app: Any, window: Any) -> None:
    """Ctrl+C / SIGTERM close the window properly (settings saved, engine shut down, nothing orphaned)."""
    from PySide6.QtCore import QTimer

    def quit_now(*_: object) -> None:
        window.close()
        app.quit()

    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, quit_now)
    # Python runs signal handlers only between bytecodes; a idle timer gives it a chance while Qt waits.
    wake = QTimer(window)
    wake.timeout.connect(lambda: None)
    wake.start(250)
    app.aboutToQuit.connect(window.close)


def run_gui(args: argparse.Namespace) -> int:
    problem = display_problem()
    if problem:
        print(f"roofline: cannot open the desktop app: {problem}. "
              f"Use the command line instead: `roofline --help` (e.g. `roofline chat`, `roofline bench`).",
              file=sys.stderr)
        return NO_DISPLAY_EXIT
    from app.ui.window import qt_env, xcb_check

    missing = xcb_check.check()  # Qt would abort with no word on what to install
    if missing:
        print(missing, file=sys.stderr)
        return xcb_check.PROBE_EXIT

    qt_env.prepare()  # before Qt starts
    from PySide6.QtCore import QTimer
    from PySide6.QtWidgets import QApplication

    from app.ui.window.main_window import MainWindow

    existing = QApplication.instance()
    app = existing if isinstance(existing, QApplication) else QApplication(sys.argv[:1])
    app.setApplicationName("Roofline")
    app.setOrganizationName("Roofline")
    from PySide6.QtGui import QIcon

    from app.selftest import resources_dir

    icon = resources_dir() / "roofline.svg"
    if icon.is_file():
        QApplication.setWindowIcon(QIcon(str(icon)))  # window, taskbar, dock
    QApplication.setDesktopFileName("io.github.roofline.Roofline")  # Wayland: match packaging/linux/*.desktop
    window = MainWindow()
    window.show()
    _quit_on_signals(app, window)
    model = getattr(args, "model", None)
    if model:
        path = Path(model).expanduser()
        if not path.exists():
            print(f"roofline: model file not found: {path}", file=sys.stderr)
            return 1
        QTimer.singleShot(0, window, lambda: window.load_model(path))
    else:
        QTimer.singleShot(0, window, window.load_default_model)
    screenshot = getattr(args, "screenshot", None)
    quit_after = getattr(args, "quit_after", None)
    if screenshot and quit_after is None:
        quit_after = 5.0
    if quit_after is not None:
        def finish() -> None:
            if screenshot:
                Path(screenshot).parent.mkdir(parents=True, exist_ok=True)
                window.grab().save(str(screenshot))
                print(f"screenshot saved: {screenshot}")
            window.close()
            app.quit()

        # A busy machine may still be loading when the time is up: a screenshot of that shows nothing of the
        # model, so wait for the load to end (loaded, or a banner saying why not), up to STARTUP_WAIT_S more.
        deadline = time.monotonic() + quit_after + STARTUP_WAIT_S

        def finish_when_settled() -> None:
            settled = window.engine.loaded_info is not None or window.banner.isVisible()
            if settled or time.monotonic() >= deadline:
                finish()
            else:
                QTimer.singleShot(250, window, finish_when_settled)

        QTimer.singleShot(int(quit_after * 1000), window, finish_when_settled)
    app.exec()
    return 0
