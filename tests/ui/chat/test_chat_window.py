"""End-to-end chat window tests on the real engine and the real default model (offscreen, short replies).

Each test starts its own engine process; replies are capped at a few tokens because the machine is small.
"""

from __future__ import annotations

import time

import pytest
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QApplication, QDialog

from app.core.chat.store import ChatStore
from app.ui.engine_link import engine_qt as E
from app.ui.window.main_window import MainWindow
from fake_window import make_window

pytestmark = [pytest.mark.model, pytest.mark.gui]


def _open(qtbot, max_tokens: int = 6) -> MainWindow:
    win = make_window(qtbot, as_started=True)
    win.show()
    win.measure_bandwidth_on_load = False  # 2 s of all cores per test: the dashboard test covers it
    win.sampling_panel.max_tokens.setValue(max_tokens)
    win.sampling_panel.seed_fixed.setChecked(True)
    win.sampling_panel.seed.setValue(7)
    win.sampling_overrides = {"ignore_eos": True}  # fixed-length replies whatever the base model says
    win.load_default_model()
    qtbot.waitUntil(lambda: win.engine.loaded_info is not None, timeout=90_000)
    return win


def _send(qtbot, win: MainWindow, text: str) -> None:
    win.input.setPlainText(text)
    qtbot.keyClick(win.input, Qt.Key.Key_Return)
    assert win.session.busy
    qtbot.waitUntil(lambda: not win.session.busy, timeout=60_000)


def _messages(win: MainWindow):
    assert win.session.conversation is not None
    return win.store.messages(win.session.conversation.id)


def test_send_stream_regenerate_edit_and_restart_persistence(qtbot, default_model, roofline_home):
    win = _open(qtbot)
    batches: list[tuple[float, str]] = []
    win.engine.tokens.connect(lambda rid, text, times: batches.append((time.monotonic(), text)))
    streamed: list[str] = []
    win.session.stream_text.connect(lambda mid, text: streamed.append(text))

    # Shift+Enter is a newline, not a send.
    win.input.setPlainText("Roses are red,")
    win.input.moveCursor(win.input.textCursor().MoveOperation.End)
    qtbot.keyClick(win.input, Qt.Key.Key_Return, Qt.KeyboardModifier.ShiftModifier)
    assert not win.session.busy and win.input.toPlainText() == "Roses are red,\n"
    win.input.setPlainText("Roses are red,")
    _send(qtbot, win, "Roses are red,")

    user, reply = _messages(win)
    # The load decided how often the window draws (half rate where llama.cpp takes every CPU): shown, applied.
    assert win.engine.pacing.describe() in win.model_info.toolTip()
    assert win.engine._batch.interval() == win.engine.pacing.text_ms
    assert (user.role, user.content, user.state) == ("user", "Roses are red,", "complete")
    assert reply.role == "assistant" and reply.state == "complete" and reply.finish_reason == "length"
    assert reply.content and "".join(streamed) == reply.content  # the view got exactly the stored text
    assert reply.metrics and reply.metrics["generated_tokens"] == 6
    assert reply.metrics["prefill_tps"] > 0 and reply.metrics["decode_tps"] > 0
    # Batching: at most one view update per 16 ms timer tick (≤ ~60/s), plus the final drain at Done.
    span = batches[-1][0] - batches[0][0]
    assert len(batches) <= span / 0.016 + 2, (len(batches), span)
    widget = win.message_view.widget_for(reply.id)
    assert widget is not None and widget.text == reply.content
    assert len(win.dashboard.history) == 1
    assert win.dashboard.card_decode.value.text().endswith("tok/s")
    qtbot.waitUntil(lambda: win.dashboard.curve_decode.getData()[1] is not None, timeout=2000)  # plots: a frame later
    assert win.dashboard.curve_decode.getData()[1][0] == pytest.approx(reply.metrics["decode_tps"])

    # Regenerate replaces the last reply.
    assert win.regen_button.isEnabled()
    qtbot.mouseClick(win.regen_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: not win.session.busy, timeout=60_000)
    user2, reply2 = _messages(win)
    assert user2.id == user.id and reply2.id != reply.id and reply2.state == "complete"
    assert win.message_view.message_ids() == [user.id, reply2.id]
    assert len(win.dashboard.history) == 1  # the replaced reply left the speed series

    # Edit-and-resend replaces the user message and everything after it.
    win.begin_edit(user.id)
    assert win.input.toPlainText() == "Roses are red," and win.edit_label.isVisibleTo(win)
    _send(qtbot, win, "Violets are blue,")
    msgs = _messages(win)
    assert [m.role for m in msgs] == ["user", "assistant"]
    assert msgs[0].content == "Violets are blue," and msgs[1].state == "complete"
    assert not win.edit_label.isVisibleTo(win)
    conv_id = win.session.conversation.id  # type: ignore[union-attr]
    expected = [(m.role, m.content, m.state) for m in msgs]
    win.close()

    # A new window on the same ROOFLINE_HOME shows the same conversation.
    again = make_window(qtbot, as_started=True)
    assert again.session.conversation is not None and again.session.conversation.id == conv_id
    assert [(m.role, m.content, m.state) for m in _messages(again)] == expected
    assert len(again.message_view.message_ids()) == 2
    assert len(again.dashboard.history) == 1  # the metrics came back from the store
    assert again.conversations.model.rowCount() == 1
    again.close()


def test_stop_with_escape_keeps_text_and_continue(qtbot, default_model):
    win = _open(qtbot, max_tokens=400)
    win.input.setPlainText("Once upon a time")
    qtbot.keyClick(win.input, Qt.Key.Key_Return)
    reply_id = win.session.streaming_message_id
    assert reply_id is not None
    qtbot.waitUntil(lambda: len(win.message_view.widget_for(reply_id).text) > 10, timeout=60_000)  # type: ignore[union-attr]
    qtbot.keyClick(win.input, Qt.Key.Key_Escape)
    qtbot.waitUntil(lambda: not win.session.busy, timeout=30_000)
    msg = win.store.message(reply_id)
    assert msg is not None and msg.state == "interrupted" and msg.finish_reason == "cancelled"
    assert msg.metrics is not None and 0 < msg.metrics["generated_tokens"] < 400
    assert msg.content == win.message_view.widget_for(reply_id).text  # type: ignore[union-attr]
    assert win.continue_button.isVisibleTo(win)
    win.sampling_panel.max_tokens.setValue(4)
    assert win.continue_reply()
    qtbot.waitUntil(lambda: not win.session.busy, timeout=60_000)
    cont = win.store.message(reply_id)
    assert cont is not None and cont.state == "complete"
    assert cont.content.startswith(msg.content) and len(cont.content) > len(msg.content)


def test_engine_killed_mid_stream_then_restart(qtbot, default_model):
    win = _open(qtbot, max_tokens=400)
    win.input.setPlainText("The history of the city")
    qtbot.keyClick(win.input, Qt.Key.Key_Return)
    reply_id = win.session.streaming_message_id
    assert reply_id is not None
    qtbot.waitUntil(lambda: len(win.message_view.widget_for(reply_id).text) > 10, timeout=60_000)  # type: ignore[union-attr]
    old_pid = win.engine.pid
    errors: list[object] = []
    win.engine.error.connect(errors.append)
    win.engine.kill()
    qtbot.waitUntil(lambda: win.engine.state == E.DEAD, timeout=10_000)
    qtbot.wait(300)
    assert not win.session.busy
    # One error, one banner, no dialogs.
    assert len(errors) == 1
    assert not [w for w in QApplication.topLevelWidgets() if isinstance(w, QDialog) and w.isVisible()]
    msg = win.store.message(reply_id)
    assert msg is not None and msg.state == "interrupted" and msg.content
    assert msg.content == win.message_view.widget_for(reply_id).text  # type: ignore[union-attr]
    assert "SIGKILL" in (msg.error or "")
    assert win.banner.isVisibleTo(win) and win.banner.restart_button.isVisibleTo(win)
    assert "SIGKILL" in win.banner.text()
    assert not win.regen_button.isEnabled()  # nothing to generate with until restarted
    qtbot.mouseClick(win.banner.restart_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: win.engine.loaded_info is not None, timeout=90_000)
    assert win.engine.pid != old_pid and not win.banner.isVisibleTo(win), win.banner.text()
    win.sampling_panel.max_tokens.setValue(4)
    assert win.regenerate()
    qtbot.waitUntil(lambda: not win.session.busy, timeout=60_000)
    last = _messages(win)[-1]
    assert last.role == "assistant" and last.state == "complete" and last.id != reply_id


def test_window_crash_leaves_streaming_reply_recoverable(qtbot, roofline_home):
    """A window that died mid-reply left a `streaming` row; the next window shows it as interrupted."""
    store = ChatStore()
    conv = store.create_conversation("crashed")
    store.add_message(conv.id, "user", "hi")
    reply = store.add_message(conv.id, "assistant", "partial text", state="streaming")
    store.close()
    win = make_window(qtbot, as_started=True)
    msg = win.store.message(reply.id)
    assert msg is not None and msg.state == "interrupted" and msg.content == "partial text"
    widget = win.message_view.widget_for(reply.id)
    assert widget is not None and widget.state_label.text() == "interrupted"
    assert win.continue_button.isVisibleTo(win)


def test_gui_command_opens_the_window_on_the_default_model(default_model, tmp_path):
    """`roofline gui` (what `roofline` alone runs) loads the default model; --screenshot/--quit-after script it.
    Half a second is up long before the engine has started: the screenshot waits for the load all the same."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    from PySide6.QtGui import QImage

    shot = tmp_path / "window.png"
    env = dict(os.environ, QT_QPA_PLATFORM="offscreen")
    root = Path(__file__).resolve().parents[3]
    proc = subprocess.run([str(Path(sys.executable).parent / "roofline"), "gui", "--screenshot", str(shot),
                           "--quit-after", "0.5"], env=env, cwd=root, capture_output=True, text=True,
                          timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr
    image = QImage(str(shot))
    assert image.width() >= 800 and image.height() >= 500
    from app.core.config import settings as S

    assert S.load_settings().settings.last_model == str(default_model)  # it loaded the default model


def test_request_error_marks_reply_and_shows_reason(qtbot, default_model, monkeypatch):
    """A message longer than the context: the engine refuses it; the reply is `error`, the banner says why."""
    from app.ui.chat import too_long

    offered: list[object] = []
    # the ways out are asked in a modal box (tests/ui/window/test_too_long_flow.py): here the user closes it
    monkeypatch.setattr(too_long, "ask", lambda *args: offered.append(args) or None)
    monkeypatch.setenv("ROOFLINE_N_CTX", "256")
    win = _open(qtbot)
    assert win.engine.loaded_info is not None and win.engine.loaded_info.n_ctx == 256
    _send(qtbot, win, "word " * 400)
    qtbot.waitUntil(lambda: bool(offered), timeout=10_000)
    _user, reply = _messages(win)
    assert reply.state == "error" and "context" in (reply.error or "")
    assert win.banner.isVisibleTo(win) and "context" in win.banner.text()
    assert not win.banner.restart_button.isVisibleTo(win)  # the engine is fine: no restart offered
    assert win.message_view.widget_for(reply.id).state_label.text() == "error"  # type: ignore[union-attr]
    _send(qtbot, win, "Hi")  # and the window goes on working
    assert _messages(win)[-1].state == "complete"


def test_a_failed_load_brings_the_previous_model_back(qtbot, default_model, tmp_path):
    """The engine lets the old model go before it tries a new one: after a failure the window loads the old one
    again, and the chat goes on with it."""
    win = _open(qtbot, max_tokens=2)
    broken = tmp_path / "broken-Q4_K_M.gguf"
    broken.write_bytes(b"this is not a GGUF file" * 100)
    errors: list[object] = []
    win.engine.error.connect(errors.append)
    win.load_model(broken)
    qtbot.waitUntil(lambda: bool(errors), timeout=60_000)
    assert "again" in win.banner.text()
    qtbot.waitUntil(lambda: win.engine.loaded_info is not None
                    and win.engine.loaded_info.model_path == str(default_model), timeout=90_000)
    assert win.session.model_path == str(default_model) and win.engine.state == E.IDLE
    _send(qtbot, win, "Hello")
    assert _messages(win)[-1].state == "complete"
    win.close()


def test_settings_reload_during_a_reply_stops_it_as_reloaded_and_settles(qtbot, default_model, monkeypatch):
    """Settings ▸ OK with a new context size while a reply streams, answered "stop and reload": the real
    engine's Done for the reply arrives after the Load was sent; the status bar ends idle, not "loading"."""
    from app.ui.settings.dialog import SettingsDialog
    from app.ui.window import chat_flow

    win = _open(qtbot, max_tokens=400)
    new_ctx = 1024 if win.settings.n_ctx != 1024 else 2048
    monkeypatch.setattr(chat_flow, "ask_to_stop_for_reload", lambda parent: True)
    monkeypatch.setattr(SettingsDialog, "exec", lambda self: 1)
    monkeypatch.setattr(SettingsDialog, "result_settings",
                        lambda self: win.settings.model_copy(update={"n_ctx": new_ctx}))
    win.input.setPlainText("Once upon a time")
    qtbot.keyClick(win.input, Qt.Key.Key_Return)
    reply_id = win.session.streaming_message_id
    assert reply_id is not None
    qtbot.waitUntil(lambda: len(win.message_view.widget_for(reply_id).text) > 5, timeout=60_000)  # type: ignore[union-attr]
    win.open_settings()
    qtbot.waitUntil(lambda: win.engine.loaded_info is not None and win.engine.loaded_info.n_ctx == new_ctx
                    and not win.session.busy, timeout=90_000)
    qtbot.wait(200)
    assert win.engine.state == E.IDLE and win.state_label.text().startswith("engine: idle")
    msg = win.store.message(reply_id)
    assert msg is not None and msg.state == "interrupted" and msg.finish_reason == "model_reloaded"
    assert win.message_view.widget_for(reply_id).state_label.text() == "stopped: model reloaded"  # type: ignore[union-attr]
    assert win.continue_button.isVisibleTo(win)
    win.close()
