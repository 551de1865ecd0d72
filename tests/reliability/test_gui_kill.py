"""The GUI process SIGKILLed while a reply streams, three times in a row on the same database.

A driver runs the real `MainWindow` (offscreen, the real default model, the default chat database under
ROOFLINE_HOME) in a subprocess: two short replies complete, a long one starts streaming, and the test kills the
process at a random moment. The driver reports on stdout every message it committed and every token batch it
showed. After each kill: the database passes `PRAGMA integrity_check`; every committed message is there,
unchanged; the reply that was streaming keeps at least what was on disk just before the kill and nothing that
was never shown; the orphaned engine process exits by itself; the next start marks that reply `interrupted`.
"""

from __future__ import annotations

import json
import os
import random
import signal
import sqlite3
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path
from typing import Any

import psutil
import pytest

from app.core.config import paths
from reliability_plugin import counting_losses, record

pytestmark = [pytest.mark.model, pytest.mark.gui]
ROOT = Path(__file__).resolve().parents[2]
ROUNDS = 3

DRIVER = textwrap.dedent("""
    import json, sys
    from pathlib import Path
    from PySide6.QtCore import QTimer
    from PySide6.QtWidgets import QApplication
    from app.engine import protocol as P
    from app.ui.window.main_window import MainWindow

    model, tag = sys.argv[1], sys.argv[2]
    def say(**kw):
        print(json.dumps(kw), flush=True)

    app = QApplication(["roofline"])
    w = MainWindow()
    plan = [5, 5, 1000]  # max tokens per reply: two short ones complete, the long one is killed
    turn = [0]
    def next_turn():
        if not plan:
            return
        n = plan.pop(0)
        turn[0] += 1
        w.session.sampling = P.Sampling(temperature=0.0, max_tokens=n, ignore_eos=True, seed=1)
        assert w.session.send(f"{tag} turn {turn[0]}: go on.")
        if n > 100:
            say(long=w.session.streaming_message_id, engine_pid=w.engine.pid)
    def added(m):
        if m.role == "user":
            say(committed=m.id, role=m.role, content=m.content, state=m.state)
    def finished(m):
        say(committed=m.id, role=m.role, content=m.content, state=m.state)
        QTimer.singleShot(0, next_turn)
    w.session.message_added.connect(added)
    w.session.message_finished.connect(finished)
    w.engine.tokens.connect(lambda rid, text, times: say(tokens=text))
    w.engine.loaded.connect(lambda loaded: QTimer.singleShot(0, next_turn))
    w.engine.error.connect(lambda e: say(error=e.message))
    w.load_model(Path(model))
    app.exec()
""")


class Driver:
    def __init__(self, script: Path, model: Path, tag: str):
        env = dict(os.environ, QT_QPA_PLATFORM="offscreen", PYTHONUNBUFFERED="1")
        self.proc = subprocess.Popen([sys.executable, str(script), str(model), tag], cwd=ROOT, env=env,
                                     stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        self.lines: list[dict[str, Any]] = []
        self.cond = threading.Condition()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            if line.startswith("{"):
                with self.cond:
                    self.lines.append(json.loads(line))
                    self.cond.notify_all()

    def wait(self, pred: Any, timeout: float = 120.0) -> None:
        with self.cond:
            if not self.cond.wait_for(lambda: pred(self.lines) or self.proc.poll() is not None, timeout):
                raise AssertionError(f"driver timed out; last lines {self.lines[-3:]!r}")
        assert self.proc.poll() is None, f"the driver exited early: {self.lines[-3:]!r}"

    def shown_after_long(self) -> str:
        with self.cond:
            idx = next(i for i, d in enumerate(self.lines) if "long" in d)
            return "".join(d["tokens"] for d in self.lines[idx:] if "tokens" in d)


def _db_rows(db: Path) -> list[tuple[int, str, str, str]]:
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=5)
    try:
        return [tuple(r) for r in con.execute("SELECT id, role, content, state FROM messages ORDER BY id")]
    finally:
        con.close()


def _gone(pid: int, timeout: float = 15.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if psutil.Process(pid).status() == psutil.STATUS_ZOMBIE:
                return True
        except psutil.NoSuchProcess:
            return True
        time.sleep(0.05)
    return False


def test_gui_killed_while_streaming_keeps_every_saved_message(default_model: Path, tmp_path: Path) -> None:
    rng = random.Random(11)
    script = tmp_path / "driver.py"
    script.write_text(DRIVER)
    (paths.config_dir() / "settings.json").write_text(json.dumps({"version": 1, "n_ctx": 1024, "threads": 1}))
    db = paths.data_dir() / "chats.sqlite3"
    committed: dict[int, tuple[str, str, str]] = {}  # id -> (role, content, state) as the app last committed it
    with counting_losses() as losses:
        for round_no in range(ROUNDS):
            driver = Driver(script, default_model, f"r{round_no}")
            try:
                driver.wait(lambda ls: any("long" in d for d in ls))
                long_id = next(d["long"] for d in driver.lines if "long" in d)
                engine_pid = next(d["engine_pid"] for d in driver.lines if "long" in d)
                driver.wait(lambda ls, driver=driver: len(driver.shown_after_long()) >= 20)
                # Let the periodic flush put some of the reply on disk, then kill at a random moment.
                deadline = time.monotonic() + 30
                while not any(r[0] == long_id and r[2] for r in _db_rows(db)) and time.monotonic() < deadline:
                    time.sleep(0.05)
                time.sleep(rng.uniform(0.0, 0.6))
                on_disk = next(r[2] for r in _db_rows(db) if r[0] == long_id)
                driver.proc.send_signal(signal.SIGKILL)
                driver.proc.wait(10)
            finally:
                if driver.proc.poll() is None:
                    driver.proc.kill()
            shown = driver.shown_after_long()
            for d in driver.lines:
                if "committed" in d:
                    committed[d["committed"]] = (d["role"], d["content"], d["state"])
            # Reopen the database as the next start would; the loss count comes first (recorded however
            # the test ends), then everything else about the round.
            rows = {r[0]: r[1:] for r in _db_rows(db)}
            losses.check(committed, rows)
            assert driver.proc.returncode == -signal.SIGKILL
            record("kills survived")
            assert not any("error" in d for d in driver.lines), driver.lines
            # The engine the window started notices its parent is gone and exits (no orphan left running).
            assert _gone(engine_pid), f"engine {engine_pid} outlived the killed window"
            con = sqlite3.connect(db)
            assert con.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
            con.close()
            role, content, state = rows[long_id]
            assert (role, state) == ("assistant", "streaming")
            assert content.startswith(on_disk) and shown.startswith(content) and content, (on_disk, content, shown)
            # What the next start does with it: the reply becomes `interrupted`, its text untouched.
            committed[long_id] = ("assistant", content, "interrupted")
            if round_no == ROUNDS - 1:
                from app.core.chat.store import ChatStore

                store = ChatStore(db)
                assert store.recover_streaming() == 1
                store.close()
            # (in earlier rounds the next driver's MainWindow recovers it; checked against `committed` above)
        rows = {r[0]: r[1:] for r in _db_rows(db)}
        assert rows == committed
        assert sum(1 for r in rows.values() if r[2] == "interrupted") == ROUNDS
        assert sum(1 for r in rows.values() if r[2] == "complete") == ROUNDS * 5  # 3 users + 2 replies per round
