"""The one background-work helper: results land on the GUI thread, and never after the owner is gone."""

from __future__ import annotations

import threading

from PySide6.QtCore import QObject, QThread
from PySide6.QtWidgets import QApplication, QWidget

from app.ui.toolkit.background import run_in_background


def test_result_arrives_on_the_gui_thread(qtbot):
    owner = QWidget()
    qtbot.addWidget(owner)
    seen: list[tuple[object, bool]] = []
    worker_thread: list[str] = []

    def fn() -> int:
        worker_thread.append(threading.current_thread().name)
        return 41 + 1

    def on_done(value: object) -> None:
        seen.append((value, QThread.currentThread() is QApplication.instance().thread()))

    job = run_in_background(owner, fn, on_done, name="answer")
    qtbot.waitUntil(lambda: bool(seen), timeout=5000)
    assert seen == [(42, True)]
    assert worker_thread == ["answer"]
    assert job.finished.is_set()


def test_error_is_reported_not_raised(qtbot):
    owner = QWidget()
    qtbot.addWidget(owner)
    errors: list[BaseException] = []
    done: list[object] = []

    def fn() -> None:
        raise OSError("disk on fire")

    run_in_background(owner, fn, done.append, errors.append)
    qtbot.waitUntil(lambda: bool(errors), timeout=5000)
    assert not done and isinstance(errors[0], OSError) and "disk on fire" in str(errors[0])


def test_nothing_is_delivered_after_the_owner_is_deleted(qtbot):
    owner = QObject()
    gate = threading.Event()
    seen: list[object] = []

    def fn() -> str:
        gate.wait(5)
        return "late"

    job = run_in_background(owner, fn, seen.append)
    owner.deleteLater()
    from shiboken6 import isValid

    qtbot.waitUntil(lambda: not isValid(owner), timeout=2000)
    gate.set()
    assert job.finished.wait(5)
    for _ in range(5):
        QApplication.processEvents()
        qtbot.wait(20)
    assert seen == []


def test_cancelled_job_drops_its_result(qtbot):
    owner = QWidget()
    qtbot.addWidget(owner)
    gate = threading.Event()
    seen: list[object] = []
    job = run_in_background(owner, lambda: gate.wait(5) and "value", seen.append)
    job.cancel()
    gate.set()
    assert job.finished.wait(5)
    qtbot.wait(100)
    assert seen == [] and job.cancelled


# The owner's last reference is the callback itself (a parentless widget whose creator let go of it).
_LAST_REFERENCE = r"""
from PySide6.QtCore import QEventLoop, QTimer
from PySide6.QtWidgets import QApplication, QWidget
from app.ui.toolkit.background import run_in_background
app = QApplication([])
loop = QEventLoop()

class Owner(QWidget):
    def on_done(self, value):
        loop.quit()

def start():
    owner = Owner()
    run_in_background(owner, lambda: 42, owner.on_done)

start()
QTimer.singleShot(10_000, loop.quit)
loop.exec()
for _ in range(5):
    app.processEvents()  # the relay's deferred delete frees the callback, and with it the owner
print("ok")
"""


def test_an_owner_kept_alive_only_by_its_callback_is_freed_without_a_crash() -> None:
    import os
    import subprocess
    import sys

    env = dict(os.environ, QT_QPA_PLATFORM="offscreen")
    res = subprocess.run([sys.executable, "-c", _LAST_REFERENCE], env=env, capture_output=True, text=True,
                         timeout=60)
    assert (res.returncode, res.stdout.strip()) == (0, "ok"), res.stderr[-2000:]


# Owners deleted on the GUI thread just as their jobs finish: the worker's emit raced the relay's deletion
# and crashed the process (SIGSEGV in 3 of 3 runs of 3000 jobs before the lock in run_in_background).
_RACE = r"""
import sys, threading
import shiboken6
from PySide6.QtWidgets import QApplication, QWidget
from app.ui.toolkit.background import run_in_background
app = QApplication([])
jobs = []
for i in range(3000):
    owner = QWidget()
    go = threading.Event()
    def fn(go=go, i=i):
        go.wait()
        return i
    jobs.append(run_in_background(owner, fn, lambda v: None))
    go.set()
    shiboken6.delete(owner)
    if i % 50 == 0:
        app.processEvents()
print("ok" if all(j.finished.wait(10) for j in jobs) else "stuck")
"""


def test_an_owner_deleted_as_its_job_finishes_does_not_crash() -> None:
    import os
    import subprocess
    import sys

    env = dict(os.environ, QT_QPA_PLATFORM="offscreen")
    res = subprocess.run([sys.executable, "-c", _RACE], env=env, capture_output=True, text=True, timeout=120)
    assert (res.returncode, res.stdout.strip()) == (0, "ok"), res.stderr[-2000:]


def test_a_long_lived_owner_does_not_collect_connections(qtbot):
    from PySide6.QtCore import SIGNAL

    owner = QWidget()
    qtbot.addWidget(owner)
    seen: list[int] = []
    counts = []
    for n in (20, 40):
        for i in range(20):
            run_in_background(owner, lambda i=i: i, seen.append)
        qtbot.waitUntil(lambda n=n: len(seen) == n, timeout=10_000)
        counts.append(owner.receivers(SIGNAL("destroyed(QObject*)")))
    assert counts[0] == counts[1] <= 1  # (PySide keeps one receiver of its own for Python slots)
