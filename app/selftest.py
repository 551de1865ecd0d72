"""`roofline --self-test`: prove an installed Roofline works end to end, headless, in well under a minute.

Checks, each printed as one `ok`/`FAIL` line: the default model is present and its GGUF header parses; the
engine process starts (in a frozen app: the same executable with `--engine-worker`), loads the model and
generates a few tokens with phase metrics; the user's chat store passes SQLite's integrity check (opened
read-only: a damaged one fails the self-test, naming the file); a scratch chat store round-trips a streamed
reply; settings round-trip; the window builds offscreen and the icon renders. Exit code 0 only when every
check passed. The user's own chats and settings are never written: everything after locating the default
model and reading the chat store happens under a temporary ROOFLINE_HOME.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

PROMPT = "The capital of France is"


def resources_dir() -> Path:
    """Bundled resources: beside the frozen app's modules; else the source tree's `resources/` (a checkout
    or an editable install); else `<prefix>/share/roofline/resources`, where a wheel install puts them."""
    base = getattr(sys, "_MEIPASS", None)
    if base:
        return Path(base) / "resources"
    source = Path(__file__).resolve().parents[1] / "resources"
    installed = Path(sys.prefix) / "share" / "roofline" / "resources"
    return source if source.is_dir() or not installed.is_dir() else installed


class SelfTest:
    def __init__(self, out: Callable[[str], None] = print) -> None:
        self.out = out
        self.passed = 0
        self.failed = 0
        self.facts: dict[str, Any] = {}

    def check(self, name: str, fn: Callable[[], str]) -> bool:
        t0 = time.perf_counter()
        try:
            detail = fn()
        except Exception as exc:  # noqa: BLE001 - a self-test reports every failure and goes on
            self.failed += 1
            tb = traceback.format_exc().strip().splitlines()
            self.out(f"FAIL {name}: {type(exc).__name__}: {exc}")
            for line in tb[-6:-1]:
                self.out(f"     {line}")
            return False
        self.passed += 1
        self.out(f"ok   {name}: {detail} ({(time.perf_counter() - t0) * 1000:.0f} ms)")
        return True


def _check_model(st: SelfTest, model: Path | None) -> Callable[[], str]:
    def run() -> str:
        from app.core.gguf.info import inspect_gguf
        from app.core.metrics.phase import fmt_bytes
        from app.core.models.default_model import default_model_path

        path = model or default_model_path()
        if not path.is_file():
            raise FileNotFoundError(f"no model file at {path}")
        info = inspect_gguf(path)
        st.facts["model"] = path
        return f"{path.name}, {fmt_bytes(path.stat().st_size)}, architecture {info.architecture}"

    return run


def _check_engine(st: SelfTest, n_tokens: int, timeout: float) -> Callable[[], str]:
    def run() -> str:
        from app.core.metrics.phase import PhaseMetrics
        from app.engine import protocol as P
        from app.engine.client import EngineClient, worker_command

        model: Path = st.facts["model"]
        with EngineClient() as client:
            loaded = client.load(P.LoadConfig(model_path=str(model), n_ctx=512), timeout=timeout)
            assert client.ready is not None, "the engine never said it was ready"
            text = ""
            done = None
            sampling = P.Sampling(temperature=0.0, max_tokens=n_tokens, seed=1, ignore_eos=True)
            for event in client.generate(P.Generate(request_id="selftest", prompt=PROMPT, sampling=sampling),
                                         timeout=timeout):
                if isinstance(event, P.Token):
                    text += event.text
                elif isinstance(event, P.Done):
                    done = event
            assert done is not None, "no Done event"
            generated = int(done.metrics.get("generated_tokens", 0))
            if generated != n_tokens or not text.strip():
                raise RuntimeError(f"asked for {n_tokens} tokens, got {generated}: {text!r}")
            pid = client.pid
        st.facts["reply"] = text
        m = PhaseMetrics.from_dict(done.metrics)
        mode = "frozen" if getattr(sys, "frozen", False) else "python"
        from app.core.sampling import chain as sampler_module

        top_k = "C" if sampler_module.native_topk is not None else "numpy (the C extension is missing)"
        return (f"engine pid {pid} ({mode}: {' '.join(Path(a).name for a in worker_command()[:2])}), "
                f"llama.cpp {client.ready.llama_cpp_version}, CPU {client.ready.cpu_backend}, "
                f"loaded {loaded.architecture} in "
                f"{loaded.load_ms:.0f} ms, n_ctx {loaded.n_ctx}; {generated} tokens {text.strip()[:40]!r}; "
                f"TTFT {m.ttft_ms:.0f} ms, prefill {m.prefill_tps:.0f} tok/s, decode {m.decode_tps:.0f} tok/s; "
                f"sampler top-k: {top_k}")

    return run


def _check_user_store(path: Path | None = None) -> Callable[[], str]:
    def run() -> str:
        from app.core.chat.store import default_db_path
        from app.core.chat.store_recovery import integrity_problem

        db = path or default_db_path()
        if not db.exists():
            return f"no chat store yet ({db})"
        problem = integrity_problem(db)
        if problem:
            raise RuntimeError(f"{db} is damaged: {problem}. The next start of the window keeps it aside "
                               f"and recovers what it can.")
        return f"{db} passes PRAGMA integrity_check (read-only)"

    return run


def _check_store(st: SelfTest) -> str:
    import sqlite3

    from app.core.chat.store import ChatStore, StreamWriter

    db = Path(os.environ["ROOFLINE_HOME"]) / "selftest.sqlite3"
    store = ChatStore(db)
    conv = store.create_conversation("self-test")
    store.add_message(conv.id, "user", PROMPT)
    reply = store.add_message(conv.id, "assistant", state="streaming")
    writer = StreamWriter(store, reply.id, interval=0.0)
    text = st.facts.get("reply") or " Paris."
    for ch in text:
        writer.append(ch)
    writer.flush()
    store.update_message(reply.id, state="complete")
    store.close()
    reopened = ChatStore(db)
    msgs = reopened.messages(conv.id)
    reopened.close()
    if [m.content for m in msgs] != [PROMPT, text]:
        raise RuntimeError(f"stored messages differ: {[m.content for m in msgs]!r}")
    con = sqlite3.connect(db)
    result = con.execute("PRAGMA integrity_check").fetchone()[0]
    con.close()
    if result != "ok":
        raise RuntimeError(f"integrity_check: {result}")
    return f"{len(msgs)} messages written, reopened intact, integrity_check ok (SQLite {sqlite3.sqlite_version})"


def _check_settings() -> str:
    from app.core.config.settings import load_settings, save_settings

    first = load_settings()
    if first.warning:
        raise RuntimeError(first.warning)
    first.settings.n_ctx = 2048
    path = save_settings(first.settings)
    again = load_settings(path)
    if again.warning or again.settings.n_ctx != 2048:
        raise RuntimeError("settings did not round-trip")
    return f"saved and re-read {path.name}"


def _check_gui() -> str:
    # Never show a window from a self-test, display or not.
    os.environ["QT_QPA_PLATFORM"] = "offscreen"
    from PySide6.QtCore import QSize
    from PySide6.QtGui import QIcon
    from PySide6.QtWidgets import QApplication

    from app.core.chat.store import ChatStore
    from app.core.config.settings import LoadResult, Settings

    app = QApplication.instance() or QApplication(["roofline-selftest"])
    icon_file = resources_dir() / "roofline.svg"
    if not icon_file.is_file():
        raise FileNotFoundError(f"icon missing: {icon_file}")
    icon = QIcon(str(icon_file))
    image = icon.pixmap(QSize(64, 64)).toImage()
    opaque = sum(image.pixelColor(x, y).alpha() > 0 for x in range(0, 64, 4) for y in range(0, 64, 4))
    if image.isNull() or opaque < 100:  # the icon's rounded square covers ~90 % of its 256 sample points
        raise RuntimeError(f"the SVG icon did not render ({opaque}/256 points drawn; QtSvg plugin missing?)")
    from app.ui.window.main_window import MainWindow

    store = ChatStore(Path(os.environ["ROOFLINE_HOME"]) / "gui.sqlite3")
    window = MainWindow(store=store, settings_result=LoadResult(Settings()))
    window.resize(1200, 800)
    window.show()
    app.processEvents()
    grab = window.grab()
    size = f"{grab.width()}x{grab.height()}"
    window.close()
    app.processEvents()
    store.close()
    if grab.isNull() or grab.width() < 400:
        raise RuntimeError(f"the window rendered as {size}")
    return f"main window built and rendered offscreen ({size}), icon rendered (Qt {_qt_version()})"


def _qt_version() -> str:
    import PySide6

    return str(PySide6.__version__)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="roofline --self-test",
                                     description="Check that this Roofline installation works, headless.")
    parser.add_argument("-m", "--model", help="GGUF to test with (default: the embedded default model)")
    parser.add_argument("--tokens", type=int, default=8, help="tokens to generate (default 8)")
    parser.add_argument("--timeout", type=float, default=180.0, help="seconds allowed for load and generation")
    parser.add_argument("--no-gui", action="store_true", help="skip the Qt window check")
    args = parser.parse_args(argv)
    import app

    frozen = getattr(sys, "frozen", False)
    print(f"Roofline {app.__version__} self-test ({'frozen app' if frozen else 'Python'} {sys.executable}, "
          f"Python {sys.version.split()[0]})", flush=True)
    st = SelfTest(out=lambda line: print(line, flush=True))
    model = Path(args.model).expanduser() if args.model else None
    # Locate (and, unfrozen, assemble) the default model in the real data dir, then isolate the rest.
    have_model = st.check("model", _check_model(st, model))
    st.check("your chat store", _check_user_store())
    saved_home = os.environ.get("ROOFLINE_HOME")
    with tempfile.TemporaryDirectory(prefix="roofline-selftest-") as home:
        os.environ["ROOFLINE_HOME"] = home
        try:
            if have_model:
                st.check("engine", _check_engine(st, args.tokens, args.timeout))
            st.check("chat store", lambda: _check_store(st))
            st.check("settings", _check_settings)
            if not args.no_gui:
                st.check("gui", _check_gui)
        finally:
            if saved_home is None:
                os.environ.pop("ROOFLINE_HOME", None)
            else:
                os.environ["ROOFLINE_HOME"] = saved_home
    if not have_model:
        st.failed += 1  # the engine check could not even run
    verdict = "passed" if st.failed == 0 else "FAILED"
    print(f"self-test {verdict}: {st.passed} checks ok, {st.failed} failed", flush=True)
    return 0 if st.failed == 0 else 1
