"""`roofline` command line: the app's capabilities headless (scriptable, testable, used by benchmarks).

Each sub-command lives in its own module under `app.commands` and exposes `register(subparsers)`;
modules are discovered, so adding a command never touches this file. Heavy imports stay inside the
command functions so that `roofline hw` starts fast.

Bad input ends in one line and exit status 2 (`_OneLineParser`); anything unexpected ends in one line
naming a log file that holds the traceback (`app.commands._crash`), never a traceback on the terminal.
"""

from __future__ import annotations

import argparse
import importlib
import pkgutil
import sys
from typing import NoReturn

import app.commands


class _OneLineParser(argparse.ArgumentParser):
    """argparse, but a usage error is one line (what was wrong, and where to read more) instead of the
    usage block followed by the error. Sub-command parsers inherit the class."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message} (see: {self.prog} --help)\n")


def build_parser() -> argparse.ArgumentParser:
    parser = _OneLineParser(
        prog="roofline",
        description="Run GGUF models locally with llama.cpp and see prefill vs decode, measured.",
    )
    parser.add_argument("--version", action="version", version=f"roofline {app.__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for info in sorted(pkgutil.iter_modules(app.commands.__path__), key=lambda m: m.name):
        if info.name.startswith("_"):
            continue
        module = importlib.import_module(f"app.commands.{info.name}")
        module.register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    # Child-process roles of the frozen app (no `python -m` there), dispatched before argparse. Imported by
    # name: these roles run llama_cpp in their own process; the CLI process itself never imports it.
    roles = {"--engine-worker": "app.engine.llama.worker", "--quantize": "app.engine.llama.quantize",
             "--batch-engine": "app.engine.llama.batch.__main__", "--device-probe": "app.engine.llama.device_probe"}
    if argv[:1] and argv[0] in roles:
        role = importlib.import_module(roles[argv[0]])
        return int(role.main() if argv[0] == "--engine-worker" else role.main(argv[1:]))
    if argv[:1] == ["--self-test"]:
        from app.selftest import main as selftest_main

        return selftest_main(argv[1:])
    try:
        return _run(argv)
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:  # `roofline ... | head`
        return 0
    except Exception as exc:  # noqa: BLE001 - the one place that turns any bug into a line and a log file
        from app.commands._crash import report_crash

        return report_crash(exc, argv)


def _run(argv: list[str]) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        # No sub-command: start the desktop app (what a double-click expects).
        from app.commands.gui import run_gui

        return run_gui(args)
    return int(args.func(args) or 0)


if __name__ == "__main__":
    sys.exit(main())
