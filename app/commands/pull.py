"""`roofline pull OWNER/REPO[:QUANT]`: download a model from the hub, verified, into the library.

Without :QUANT the recommended quantization for this machine is chosen (from the files' headers). Ctrl-C
stops and keeps a resumable .part: run the same command again to continue where it stopped.
"""

from __future__ import annotations

import argparse
import contextlib
import signal
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("pull", help="download a GGUF model from the hub (resumable, sha256-verified; a file "
                                    "with no sha256 is refused unless allow_unverified_downloads is set)")
    p.add_argument("spec", metavar="REPO[:QUANT]", help="e.g. bartowski/Qwen2.5-0.5B-Instruct-GGUF:Q4_K_M")
    p.add_argument("--json", action="store_true", help="print the result as JSON")
    p.add_argument("--quiet", action="store_true", help="no progress line")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from app.commands._common import fail, print_json
    from app.core.config import paths
    from app.core.files.writable import OutputPathError, ensure_writable_dir
    from app.core.hub import downloads
    from app.core.hub import listing as hub
    from app.core.hub.guard import new_folders, remove_empty

    try:
        repo, quant = hub.parse_repo_spec(args.spec)
    except ValueError as exc:
        return fail(str(exc))
    created: list[Path] = []
    try:
        rv = hub.list_variants(repo)
        if not rv.variants:
            return fail(f"{repo} has no GGUF model files")
        variant = _choose(rv, quant)
        if variant is None:
            have = ", ".join(v.quant for v in rv.variants)
            return fail(f"{repo} has no {quant} file; it has: {have}")
        try:
            models = paths.models_dir()
        except OSError as exc:
            return fail(f"cannot use the models folder: {exc.strerror or exc} ({exc.filename or ''})")
        task = downloads.plan(variant, rv.repo_id, rv.revision, models)
        created = new_folders(task.dest.parent)  # removed again if the download is refused before a byte
        try:  # the right cause (a file in the way, no permission) before any byte is fetched
            ensure_writable_dir(task.dest.parent, what="the download")  # space: checked with resume in mind
        except OutputPathError as exc:
            return fail(str(exc))
        if not args.quiet:
            _say(f"pulling {repo}:{variant.quant} ({_fmt(variant.size)}) -> {task.dest}")
        progress = downloads.Progress()
        show = _Printer(args.quiet)
        control = downloads.Control()
        try:
            with _ctrl_c_stops(control):
                path = downloads.download_variant(task, on_progress=show, control=control, progress=progress)
        except (KeyboardInterrupt, downloads.DownloadStopped):
            show.end()
            _say(f"stopped: {_fmt(progress.done)} of {_fmt(progress.total)} kept; run the same command to resume")
            return 130
        show.end()
    except (hub.HubError, downloads.DownloadError) as exc:
        remove_empty(created)  # a kept .part keeps its folders
        return fail(str(exc))
    if progress.resumed_from and not args.quiet:
        _say(f"resumed from {_fmt(progress.resumed_from)}")
    unverified = downloads.unverified_note(task.files)
    if unverified:  # said even with --quiet: the user allowed it, and must still know which file it was
        _say(f"warning: {unverified}")
    if args.json:
        print_json({"path": str(path), "repo_id": repo, "quant": variant.quant, "size": variant.size,
                    "resumed_from": progress.resumed_from, "revision": rv.revision,
                    "verified": not unverified})
    else:
        print(path)
    return 0


@contextlib.contextmanager
def _ctrl_c_stops(control: Any) -> Iterator[None]:
    """Ctrl-C asks the download to stop after the chunk in hand (the .part stays whole); a second one
    interrupts at once. A KeyboardInterrupt raised at an arbitrary point can land in a finalizer, where
    Python prints and drops it, and the download would run on to the end."""
    def on_sigint(signum: int, frame: Any) -> None:
        if control.stop.is_set():
            raise KeyboardInterrupt
        control.request("paused")

    try:
        previous = signal.signal(signal.SIGINT, on_sigint)
    except ValueError:  # not the main thread: leave Ctrl-C as it is
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


def _choose(rv, quant):  # type: ignore[no-untyped-def]
    if quant:
        return next((v for v in rv.variants if v.quant.upper() == quant.upper()), None)
    from app.core.gguf import remote_header as remote_gguf

    rows = remote_gguf.assess_repo(rv)
    best = next((r for r in rows if r.recommended), None)
    if best is not None:
        _say(f"recommended for this machine: {best.quant} ({best.verdict}"
             + (f", ~{best.decode_tps:.1f} tok/s decode" if best.decode_tps else "") + ")")
        return next(v for v in rv.variants if v.quant == best.quant and v.first.path == best.files[0])
    return rv.variants[-1]


def _fmt(n: float) -> str:
    from app.core.metrics.phase import fmt_bytes

    return fmt_bytes(n)


def _say(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


class _Printer:
    """One self-overwriting progress line on stderr (a plain line per 10 % when not a terminal)."""

    def __init__(self, quiet: bool):
        self.quiet = quiet
        self.tty = sys.stderr.isatty()
        self.last_decile = -1
        self.dirty = False

    def __call__(self, p) -> None:  # type: ignore[no-untyped-def]
        if self.quiet:
            return
        eta = p.eta_s
        eta_s = f"{int(eta // 60)}:{int(eta % 60):02d}" if eta is not None else "--:--"
        line = (f"{p.state:<11} {p.fraction * 100:5.1f}%  {_fmt(p.done)} / {_fmt(p.total)}  "
                f"{_fmt(p.speed)}/s  ETA {eta_s}")
        if self.tty:
            sys.stderr.write("\r" + line + "   ")
            sys.stderr.flush()
            self.dirty = True
        else:
            decile = int(p.fraction * 10)
            if decile != self.last_decile or p.state != "downloading":
                self.last_decile = decile
                _say(line)

    def end(self) -> None:
        if self.dirty:
            sys.stderr.write("\n")
            self.dirty = False
