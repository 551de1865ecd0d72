"""Chat flows as LM Studio and Jan users expect them: drafts kept per chat and across Edit, replies that go on
in the background, that say why they ended, and a dashboard that counts each reply once. Runs on the fake
engine: the test plays the engine's events (tokens, Done, Loaded, errors) by hand."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from PySide6.QtCore import Qt

from app.core.chat.store import ChatStore
from app.core.config.settings import LoadResult, Settings
from app.core.metrics.phase import PhaseMetrics
from app.engine import protocol as P

OFFSCREEN_NOISE = pytest.mark.qt_log_ignore("This plugin does not support propagateSizeHints")
pytestmark = [pytest.mark.gui, OFFSCREEN_NOISE]


def _window(qtbot, store: ChatStore):
    from app.ui.window.main_window import MainWindow
    from fake_engine import fake_engine, loaded_event

    win = MainWindow(store=store, settings_result=LoadResult(Settings()), engine=fake_engine())
    qtbot.addWidget(win)
    win.measure_bandwidth_on_load = False
    win.show()
    win.engine._dispatch(loaded_event())  # as if the model had loaded with the window open
    return win


@pytest.fixture
def store(tmp_path: Path):
    s = ChatStore(tmp_path / "chats.sqlite3")
    yield s
    s.close()


@pytest.fixture
def window(qtbot, store: ChatStore):
    win = _window(qtbot, store)
    yield win
    win.close()


def _request(win) -> str:
    rid = win.engine.active_request
    assert rid is not None
    return rid


def _send(win, text: str) -> str:
    win.input.setPlainText(text)
    win.submit()
    assert win.session.busy
    return _request(win)


def _tokens(win, rid: str, *texts: str, t0: float | None = None) -> None:
    now = time.monotonic() if t0 is None else t0
    for i, text in enumerate(texts):
        win.engine._on_reader_event(P.Token(rid, text, i, now + 0.01 * i))
    win.engine.drain_tokens()


def _metrics(decode_tps: float, tokens: int = 5) -> dict:
    return PhaseMetrics(prompt_tokens=10, prefill_tokens=10, prefill_ms=10.0, ttft_ms=12.0,
                        decode_tokens=tokens - 1, decode_ms=1000.0 * (tokens - 1) / decode_tps,
                        generated_tokens=tokens, itl_ms=[1000.0 / decode_tps] * (tokens - 1)).to_dict()


def _done(win, rid: str, reason: str = "stop", decode_tps: float = 20.0) -> None:
    win.engine._dispatch(P.Done(rid, "", reason, _metrics(decode_tps)))


def _last(win):
    return win.store.messages(win.session.conversation.id)[-1]


# ---------------------------------------------------------------- 1. drafts
def test_edit_then_escape_gives_the_draft_back(window, qtbot) -> None:
    rid = _send(window, "first question")
    _tokens(window, rid, "an answer")
    _done(window, rid)
    user = window.store.messages(window.session.conversation.id)[0]
    window.input.setPlainText("a long draft I am still writing")
    window.begin_edit(user.id)
    assert window.input.toPlainText() == "first question"
    window.input.setFocus()
    qtbot.keyClick(window.input, Qt.Key.Key_Escape)
    assert window.input.toPlainText() == "a long draft I am still writing"
    assert not window.edit_label.isVisibleTo(window)


def test_resending_an_edit_gives_the_draft_back(window) -> None:
    rid = _send(window, "first question")
    _done(window, rid)
    user = window.store.messages(window.session.conversation.id)[0]
    window.input.setPlainText("my draft")
    window.begin_edit(user.id)
    window.input.setPlainText("first question, better")
    window.submit()
    assert window.session.busy and window.input.toPlainText() == "my draft"


def test_each_chat_keeps_its_draft_across_switches_and_a_restart(qtbot, store: ChatStore) -> None:
    win = _window(qtbot, store)
    win.new_chat()
    first = win.session.conversation.id
    win.input.setPlainText("draft for chat one")
    win.new_chat()
    second = win.session.conversation.id
    assert win.input.toPlainText() == ""
    win.input.setPlainText("draft for chat two")
    win.open_conversation(first)
    assert win.input.toPlainText() == "draft for chat one"
    win.open_conversation(second)
    assert win.input.toPlainText() == "draft for chat two"
    win.close()

    again = _window(qtbot, store)  # the newest chat (the second) is reopened
    assert again.session.conversation.id == second
    assert again.input.toPlainText() == "draft for chat two"
    again.open_conversation(first)
    assert again.input.toPlainText() == "draft for chat one"
    again.close()


def test_a_sent_message_is_no_draft_any_more(qtbot, store: ChatStore) -> None:
    win = _window(qtbot, store)
    rid = _send(win, "hello")
    _done(win, rid)
    assert win.input.toPlainText() == ""
    win.close()
    again = _window(qtbot, store)
    assert again.input.toPlainText() == ""
    again.close()


# ---------------------------------------------------------------- 5, 6. Continue and the dashboard
def test_continue_restarts_the_live_clock_and_cards(window, qtbot) -> None:
    window.sampling_panel.max_tokens.setValue(5)
    rid = _send(window, "tell me a story")
    _tokens(window, rid, "Once", " upon")
    qtbot.wait(400)  # the first reply ended a while ago when Continue is pressed
    _done(window, rid, "length", decode_tps=11.0)
    dash = window.dashboard
    assert dash.card_decode.value.text() == "11.0 tok/s"
    assert window.continue_button.isVisibleTo(window)  # stopped at Max tokens: Continue offered
    assert window.continue_reply()
    rid2 = _request(window)
    assert rid2 != rid
    reply = _last(window)
    assert window.message_view.widget_for(reply.id).state_label.text() == "writing…"
    assert dash.card_decode.value.text() == "…"  # not the previous reply's rate
    _tokens(window, rid2, " a", " time")
    ttft = float(dash.card_ttft.value.text().split()[0])
    assert ttft < 300, ttft  # from the Continue request, not from the first send (≥ 400 ms ago)
    _done(window, rid2, "stop", decode_tps=33.0)
    assert dash.card_decode.value.text() == "33.0 tok/s"


def test_speed_series_has_one_point_per_reply_that_exists(window, qtbot) -> None:
    dash = window.dashboard
    rid = _send(window, "one")
    _done(window, rid, "cancelled", decode_tps=10.0)  # stopped...
    assert window.continue_reply()
    _done(window, _request(window), "stop", decode_tps=11.0)  # ...and continued: still one reply
    assert [round(m.decode_tps, 1) for m in dash.history] == [11.0]
    assert window.regenerate()  # replaces it
    _done(window, _request(window), "stop", decode_tps=12.0)
    rid = _send(window, "two")
    _done(window, rid, "stop", decode_tps=13.0)
    user2 = window.store.messages(window.session.conversation.id)[2]
    window.begin_edit(user2.id)
    window.input.setPlainText("two, edited")
    window.submit()  # replaces the second reply
    _done(window, _request(window), "stop", decode_tps=14.0)
    replies = [m for m in window.store.messages(window.session.conversation.id) if m.role == "assistant"]
    assert len(replies) == 2
    assert [round(m.decode_tps, 1) for m in dash.history] == [12.0, 14.0]
    qtbot.waitUntil(lambda: dash.curve_decode.getData()[0] is not None
                    and len(dash.curve_decode.getData()[0]) == 2, timeout=2000)
    assert [round(v, 1) for v in dash.curve_decode.getData()[1]] == [12.0, 14.0]


# ---------------------------------------------------------------- 8. switching chats mid-reply
def test_a_reply_finishes_in_its_own_chat_after_switching(window) -> None:
    rid = _send(window, "write a poem")
    first = window.session.conversation.id
    reply_id = window.session.streaming_message_id
    _tokens(window, rid, "Roses")
    window.new_chat()  # switching while the reply is written
    other = window.session.conversation.id
    assert other != first and window.session.busy
    assert not window.send_button.isEnabled() and "another chat" in window.send_button.toolTip()
    window.input.setPlainText("a question here")
    window.submit()  # Enter: not sent, and the hint says why; the text stays
    assert "another chat" in window.hint_label.text() and window.input.toPlainText() == "a question here"
    _tokens(window, rid, " are", " red")
    _done(window, rid, "stop", decode_tps=9.0)
    assert not window.session.busy
    reply = window.store.message(reply_id)
    assert reply.state == "complete" and reply.content == "Roses are red"
    assert reply.metrics is not None and reply.metrics["generated_tokens"] == 5
    assert window.store.messages(other) == []
    assert window.dashboard.history == []  # the shown chat has no replies
    window.open_conversation(first)
    widget = window.message_view.widget_for(reply_id)
    assert widget is not None and widget.text == "Roses are red"
    assert widget.state_label.text() == ""  # ended normally: no "interrupted", no "stopped"
    assert len(window.dashboard.history) == 1


def test_reopening_the_chat_mid_reply_shows_all_of_it_and_follows_it(window) -> None:
    rid = _send(window, "write a poem")
    first = window.session.conversation.id
    reply_id = window.session.streaming_message_id
    _tokens(window, rid, "Roses")
    window.new_chat()
    _tokens(window, rid, " are")  # arrives while another chat is shown
    window.open_conversation(first)
    _tokens(window, rid, " red")
    assert window.message_view.widget_for(reply_id).text == "Roses are red"
    window.escape()  # Esc stops the reply of the chat on screen
    assert any(isinstance(c, P.Cancel) for c in window.engine.client.sent)


# ---------------------------------------------------------------- why a reply ended
@pytest.mark.parametrize("reason, label, continued", [
    ("cancelled", "stopped", True), ("length", "max tokens", True), ("context_full", "context full", False),
    ("stop", "", False)])
def test_every_reply_says_why_it_ended(window, reason: str, label: str, continued: bool) -> None:
    rid = _send(window, "hi")
    _done(window, rid, reason)
    msg = _last(window)
    assert window.message_view.widget_for(msg.id).state_label.text() == label
    assert window.continue_button.isVisibleTo(window) == continued


def test_a_crash_says_engine_crashed(window) -> None:
    _send(window, "hi")
    window.engine._dispatch(P.Error(None, "engine_died", "the engine died (SIGKILL)", fatal=True))
    msg = _last(window)
    widget = window.message_view.widget_for(msg.id)
    assert widget.state_label.text() == "engine crashed" and "SIGKILL" in widget.state_label.toolTip()
    assert window.mem_label.text() == ""


# ---------------------------------------------------------------- 7. Settings ▸ OK while a reply streams
def _settings_change_needing_reload(monkeypatch, window) -> None:
    from app.ui.settings.dialog import SettingsDialog

    window.session.model_path = "/models/fake-Q4_K_M.gguf"

    def result(self):
        return window.settings.model_copy(update={"n_ctx": 1024 if window.settings.n_ctx != 1024 else 2048})

    monkeypatch.setattr(SettingsDialog, "exec", lambda self: 1)
    monkeypatch.setattr(SettingsDialog, "result_settings", result)


def test_settings_needing_a_reload_ask_before_stopping_a_reply(window, monkeypatch) -> None:
    from app.ui.window import chat_flow

    asked: list[bool] = []
    monkeypatch.setattr(chat_flow, "ask_to_stop_for_reload", lambda parent: asked.append(True) or False)
    _settings_change_needing_reload(monkeypatch, window)
    rid = _send(window, "hi")
    window.open_settings()
    assert asked == [True]
    sent = window.engine.client.sent
    assert not any(isinstance(c, (P.Cancel, P.Load)) for c in sent)  # "after the reply": nothing stopped
    assert "reloads when this reply ends" in window.hint_label.text()
    _done(window, rid)
    assert window.hint_label.text() == ""
    assert isinstance(sent[-1], P.Load) and sent[-1].config.n_ctx == window.settings.n_ctx


def test_settings_reload_that_stops_a_reply_says_so_and_the_status_bar_settles(window, monkeypatch) -> None:
    from app.ui.window import chat_flow
    from fake_engine import loaded_event

    monkeypatch.setattr(chat_flow, "ask_to_stop_for_reload", lambda parent: True)
    _settings_change_needing_reload(monkeypatch, window)
    rid = _send(window, "hi")
    _tokens(window, rid, "Hel")
    window.open_settings()
    sent = window.engine.client.sent
    assert isinstance(sent[-2], P.Cancel) and isinstance(sent[-1], P.Load)
    _done(window, rid, "cancelled")  # the reply's end arrives after the Load was sent
    window.engine._dispatch(P.Progress("loading", 1.0))
    window.engine._dispatch(loaded_event())
    assert "loading" not in window.state_label.text() and "idle" in window.state_label.text()
    msg = _last(window)
    assert msg.state == "interrupted" and msg.content == "Hel"
    assert window.message_view.widget_for(msg.id).state_label.text() == "stopped: model reloaded"


def test_settings_needing_no_reload_do_not_touch_a_reply(window, monkeypatch) -> None:
    from app.ui.settings.dialog import SettingsDialog
    from app.ui.window import chat_flow

    monkeypatch.setattr(chat_flow, "ask_to_stop_for_reload", lambda parent: pytest.fail("asked"))
    monkeypatch.setattr(SettingsDialog, "exec", lambda self: 1)
    window.session.model_path = "/models/fake-Q4_K_M.gguf"
    _send(window, "hi")
    window.open_settings()
    assert window.session.busy
    assert not any(isinstance(c, (P.Cancel, P.Load)) for c in window.engine.client.sent)


# ---------------------------------------------------------------- 2. failed load or connection
def test_a_failed_server_connection_keeps_the_local_model(window, qtbot) -> None:
    from fake_engine import FakeClient

    before = window.model_info.text()
    assert before.startswith("Q4_K_M")
    local = window.engine.client
    errors: list[P.Error] = []
    window.engine.error.connect(errors.append)
    window.connect_remote("http://127.0.0.1:1", api_key=None)  # nothing listens on port 1
    qtbot.waitUntil(lambda: bool(errors), timeout=30_000)
    assert isinstance(window.engine.client, FakeClient) and window.engine.client is local and local.alive
    assert window.engine.loaded_info is not None and window.engine.remote is None
    assert window.engine.state == "idle"
    assert window.model_info.text() == before
    assert "Still using fake model" in window.banner.label.text()
    rid = _send(window, "still works")  # the local model answers
    assert isinstance(local.sent[-1], P.Generate) and local.sent[-1].request_id == rid


def test_a_failed_load_loads_the_previous_model_again(window) -> None:
    from fake_engine import loaded_event

    engine = window.engine
    window.load_model(Path("/models/fake-Q4_K_M.gguf"))
    engine._dispatch(loaded_event())
    window.load_model(Path("/models/broken.gguf"))
    assert engine.client.sent[-1].config.model_path == "/models/broken.gguf"
    engine._dispatch(P.Error(None, "load_failed", "not a GGUF file."))
    last = engine.client.sent[-1]
    assert isinstance(last, P.Load) and last.config.model_path == "/models/fake-Q4_K_M.gguf"
    assert "Loading fake-Q4_K_M.gguf again" in window.banner.label.text()
    engine._dispatch(loaded_event())
    assert window.session.model_path == "/models/fake-Q4_K_M.gguf"
    assert window.model_combo.currentData() == "/models/fake-Q4_K_M.gguf"
    assert window.banner.isVisibleTo(window)  # the reason stays on screen


# ---------------------------------------------------------------- the status bar's KV count
def test_status_bar_kv_follows_the_reply(window) -> None:
    window.engine._dispatch(P.Stats(rss_bytes=300 << 20, kv_cells_used=0, kv_cells_allocated=512,
                                    kv_bytes_used=0, kv_bytes_allocated=0, loaded=True))
    assert "KV 0/512" in window.mem_label.text()
    rid = _send(window, "hi")
    window.engine._dispatch(P.Prefilled(rid, prompt_tokens=20, prefill_tokens=20, prefill_ms=5.0, ttft_ms=6.0,
                                        kv_cells_used=20, kv_bytes_used=0, kv_bytes_per_cell=0.0))
    _tokens(window, rid, "a", "b", "c", "d")
    window.dashboard._refresh_live()
    assert "KV 23/512" in window.mem_label.text() and "RSS" in window.mem_label.text()


def test_a_server_that_answers_takes_over_and_the_status_bar_says_so(window, qtbot, monkeypatch) -> None:
    import dataclasses

    from app.engine.remote import backend as remote
    from fake_engine import loaded_event

    class AnsweringServer:
        alive, pid = True, None

        def __init__(self, url: str, api_key: str | None = None, model: str | None = None,
                     on_event=None):  # type: ignore[no-untyped-def]
            self.on_event = on_event

        def connect(self) -> P.Loaded:
            loaded = dataclasses.replace(loaded_event("served (remote)"), model_path="http://127.0.0.1:9/v1",
                                         chat_template_source="server")
            self.on_event(loaded)
            return loaded

        def close(self, timeout: float = 2.0) -> None:
            self.alive = False

        def send(self, command: object) -> None:
            pass

    monkeypatch.setattr(remote, "RemoteClient", AnsweringServer)
    window.engine._dispatch(P.Stats(rss_bytes=300 << 20, kv_cells_used=0, kv_cells_allocated=512,
                                    kv_bytes_used=0, kv_bytes_allocated=0, loaded=True))
    local = window.engine.client
    _send(window, "hi")
    reply_id = window.session.streaming_message_id
    window.connect_remote("http://127.0.0.1:9")
    qtbot.waitUntil(lambda: window.engine.remote is not None, timeout=5000)
    assert isinstance(window.engine.client, AnsweringServer) and not local.alive
    assert window.mem_label.text() == "memory: on the server"  # not the local engine's last numbers
    assert not window.session.busy  # the local engine's unfinished reply ended with it
    assert window.store.message(reply_id).state == "interrupted"


def test_a_model_chosen_while_a_server_connects_wins(window, qtbot, monkeypatch) -> None:
    import dataclasses
    import threading

    from app.engine.remote import backend as remote
    from fake_engine import loaded_event

    release = threading.Event()
    answered = threading.Event()

    class LateServer:
        alive, pid = True, None

        def __init__(self, url: str, api_key: str | None = None, model: str | None = None,
                     on_event=None):  # type: ignore[no-untyped-def]
            self.on_event = on_event

        def connect(self) -> P.Loaded:
            release.wait(10)
            loaded = dataclasses.replace(loaded_event("late (remote)"), model_path="http://127.0.0.1:9/v1",
                                         chat_template_source="server")
            self.on_event(loaded)
            answered.set()
            return loaded

        def close(self, timeout: float = 2.0) -> None:
            self.alive = False

    monkeypatch.setattr(remote, "RemoteClient", LateServer)
    local = window.engine.client
    window.connect_remote("http://127.0.0.1:9")
    window.load_model(Path("/models/fake-Q4_K_M.gguf"))  # changed their mind before the server answered
    release.set()
    assert answered.wait(10)
    qtbot.wait(200)  # the late answer reaches the GUI thread now: it must change nothing
    assert window.engine.client is local and window.engine.remote is None
    assert window.engine.loaded_info.chat_template_source != "server"
    assert window.model_info.text() == "loading…"
    window.engine._dispatch(loaded_event())
    assert window.engine.loaded_info.model_path == "/models/fake-Q4_K_M.gguf"
