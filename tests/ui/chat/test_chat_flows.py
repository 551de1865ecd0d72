"""Chat flows as LM Studio and Jan users expect them: drafts kept per chat and across Edit, replies that go on
in the background, that say why they ended, and a dashboard that counts each reply once. Runs on the fake
engine: the test plays the engine's events (tokens, Done, Loaded, errors) by hand."""

from __future__ import annotations

from pathlib import Path

import pytest
from PySide6.QtCore import Qt

from app.core.chat.store import ChatStore
from app.engine import protocol as P
from chat_drive import done, open_window, request_of, send, tokens

pytestmark = pytest.mark.gui


@pytest.fixture
def store(tmp_path: Path):
    s = ChatStore(tmp_path / "chats.sqlite3")
    yield s
    s.close()


def _last(win):
    return win.store.messages(win.session.conversation.id)[-1]


# ---------------------------------------------------------------- 1. drafts
def test_edit_then_escape_gives_the_draft_back(win, qtbot) -> None:
    rid = send(win, "first question")
    tokens(win, rid, "an answer")
    done(win, rid)
    user = win.store.messages(win.session.conversation.id)[0]
    win.input.setPlainText("a long draft I am still writing")
    win.begin_edit(user.id)
    assert win.input.toPlainText() == "first question"
    win.input.setFocus()
    qtbot.keyClick(win.input, Qt.Key.Key_Escape)
    assert win.input.toPlainText() == "a long draft I am still writing"
    assert not win.edit_label.isVisibleTo(win)


def test_resending_an_edit_gives_the_draft_back(win) -> None:
    rid = send(win, "first question")
    done(win, rid)
    user = win.store.messages(win.session.conversation.id)[0]
    win.input.setPlainText("my draft")
    win.begin_edit(user.id)
    win.input.setPlainText("first question, better")
    win.submit()
    assert win.session.busy and win.input.toPlainText() == "my draft"


def test_each_chat_keeps_its_draft_across_switches_and_a_restart(qtbot, store: ChatStore) -> None:
    win = open_window(qtbot, store)
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

    again = open_window(qtbot, store)  # the newest chat (the second) is reopened
    assert again.session.conversation.id == second
    assert again.input.toPlainText() == "draft for chat two"
    again.open_conversation(first)
    assert again.input.toPlainText() == "draft for chat one"
    again.close()


def test_a_sent_message_is_no_draft_any_more(qtbot, store: ChatStore) -> None:
    win = open_window(qtbot, store)
    rid = send(win, "hello")
    done(win, rid)
    assert win.input.toPlainText() == ""
    win.close()
    again = open_window(qtbot, store)
    assert again.input.toPlainText() == ""
    again.close()


# ---------------------------------------------------------------- 5, 6. Continue and the dashboard
def test_continue_restarts_the_live_clock_and_cards(win, qtbot) -> None:
    win.sampling_panel.max_tokens.setValue(5)
    rid = send(win, "tell me a story")
    tokens(win, rid, "Once", " upon")
    qtbot.wait(400)  # the first reply ended a while ago when Continue is pressed
    done(win, rid, "length", decode_tps=11.0)
    dash = win.dashboard
    assert dash.card_decode.value.text() == "11.0 tok/s"
    assert win.continue_button.isVisibleTo(win)  # stopped at Max tokens: Continue offered
    assert win.continue_reply()
    rid2 = request_of(win)
    assert rid2 != rid
    reply = _last(win)
    assert win.message_view.widget_for(reply.id).state_label.text() == "writing…"
    assert dash.card_decode.value.text() == "…"  # not the previous reply's rate
    tokens(win, rid2, " a", " time")
    ttft = float(dash.card_ttft.value.text().split()[0])
    assert ttft < 300, ttft  # from the Continue request, not from the first send (≥ 400 ms ago)
    done(win, rid2, "stop", decode_tps=33.0)
    assert dash.card_decode.value.text() == "33.0 tok/s"


def test_speed_series_has_one_point_per_reply_that_exists(win, qtbot) -> None:
    dash = win.dashboard
    rid = send(win, "one")
    done(win, rid, "cancelled", decode_tps=10.0)  # stopped...
    assert win.continue_reply()
    done(win, request_of(win), "stop", decode_tps=11.0)  # ...and continued: still one reply
    assert [round(m.decode_tps, 1) for m in dash.history] == [11.0]
    assert win.regenerate()  # replaces it
    done(win, request_of(win), "stop", decode_tps=12.0)
    rid = send(win, "two")
    done(win, rid, "stop", decode_tps=13.0)
    user2 = win.store.messages(win.session.conversation.id)[2]
    win.begin_edit(user2.id)
    win.input.setPlainText("two, edited")
    win.submit()  # replaces the second reply
    done(win, request_of(win), "stop", decode_tps=14.0)
    replies = [m for m in win.store.messages(win.session.conversation.id) if m.role == "assistant"]
    assert len(replies) == 2
    assert [round(m.decode_tps, 1) for m in dash.history] == [12.0, 14.0]
    qtbot.waitUntil(lambda: dash.curve_decode.getData()[0] is not None
                    and len(dash.curve_decode.getData()[0]) == 2, timeout=2000)
    assert [round(v, 1) for v in dash.curve_decode.getData()[1]] == [12.0, 14.0]


# ---------------------------------------------------------------- 8. switching chats mid-reply
def test_a_reply_finishes_in_its_own_chat_after_switching(win) -> None:
    rid = send(win, "write a poem")
    first = win.session.conversation.id
    reply_id = win.session.streaming_message_id
    tokens(win, rid, "Roses")
    win.new_chat()  # switching while the reply is written
    other = win.session.conversation.id
    assert other != first and win.session.busy
    assert not win.send_button.isEnabled() and "another chat" in win.send_button.toolTip()
    win.input.setPlainText("a question here")
    win.submit()  # Enter: not sent, and the hint says why; the text stays
    assert "another chat" in win.hint_label.text() and win.input.toPlainText() == "a question here"
    tokens(win, rid, " are", " red")
    done(win, rid, "stop", decode_tps=9.0)
    assert not win.session.busy
    reply = win.store.message(reply_id)
    assert reply.state == "complete" and reply.content == "Roses are red"
    assert reply.metrics is not None and reply.metrics["generated_tokens"] == 5
    assert win.store.messages(other) == []
    assert win.dashboard.history == []  # the shown chat has no replies
    win.open_conversation(first)
    widget = win.message_view.widget_for(reply_id)
    assert widget is not None and widget.text == "Roses are red"
    assert widget.state_label.text() == ""  # ended normally: no "interrupted", no "stopped"
    assert len(win.dashboard.history) == 1


def test_reopening_the_chat_mid_reply_shows_all_of_it_and_follows_it(win) -> None:
    rid = send(win, "write a poem")
    first = win.session.conversation.id
    reply_id = win.session.streaming_message_id
    tokens(win, rid, "Roses")
    win.new_chat()
    tokens(win, rid, " are")  # arrives while another chat is shown
    win.open_conversation(first)
    tokens(win, rid, " red")
    assert win.message_view.widget_for(reply_id).text == "Roses are red"
    win.escape()  # Esc stops the reply of the chat on screen
    assert any(isinstance(c, P.Cancel) for c in win.engine.client.sent)


# ---------------------------------------------------------------- why a reply ended
@pytest.mark.parametrize("reason, label, continued", [
    ("cancelled", "stopped", True), ("length", "max tokens", True), ("context_full", "context full", False),
    ("stop", "", False)])
def test_every_reply_says_why_it_ended(win, reason: str, label: str, continued: bool) -> None:
    rid = send(win, "hi")
    done(win, rid, reason)
    msg = _last(win)
    assert win.message_view.widget_for(msg.id).state_label.text() == label
    assert win.continue_button.isVisibleTo(win) == continued


def test_a_crash_says_engine_crashed(win) -> None:
    send(win, "hi")
    win.engine._dispatch(P.Error(None, "engine_died", "the engine died (SIGKILL)", fatal=True))
    msg = _last(win)
    widget = win.message_view.widget_for(msg.id)
    assert widget.state_label.text() == "engine crashed" and "SIGKILL" in widget.state_label.toolTip()
    assert win.status_line.part("memory") == ""


# ---------------------------------------------------------------- 7. Settings ▸ OK while a reply streams
def _settings_change_needing_reload(monkeypatch, win) -> None:
    from app.ui.settings.dialog import SettingsDialog

    win.session.model_path = "/models/fake-Q4_K_M.gguf"

    def result(self):
        return win.settings.model_copy(update={"n_ctx": 1024 if win.settings.n_ctx != 1024 else 2048})

    monkeypatch.setattr(SettingsDialog, "exec", lambda self: 1)
    monkeypatch.setattr(SettingsDialog, "result_settings", result)


def test_settings_needing_a_reload_ask_before_stopping_a_reply(win, monkeypatch) -> None:
    from app.ui.window import chat_flow

    asked: list[bool] = []
    monkeypatch.setattr(chat_flow, "ask_to_stop_for_reload", lambda parent: asked.append(True) or False)
    _settings_change_needing_reload(monkeypatch, win)
    rid = send(win, "hi")
    win.open_settings()
    assert asked == [True]
    sent = win.engine.client.sent
    assert not any(isinstance(c, (P.Cancel, P.Load)) for c in sent)  # "after the reply": nothing stopped
    assert "reloads when this reply ends" in win.hint_label.text()
    done(win, rid)
    assert win.hint_label.text() == ""
    assert isinstance(sent[-1], P.Load) and sent[-1].config.n_ctx == win.settings.n_ctx


def test_settings_reload_that_stops_a_reply_says_so_and_the_status_bar_settles(win, monkeypatch) -> None:
    from app.ui.window import chat_flow
    from fake_engine import loaded_event

    monkeypatch.setattr(chat_flow, "ask_to_stop_for_reload", lambda parent: True)
    _settings_change_needing_reload(monkeypatch, win)
    rid = send(win, "hi")
    tokens(win, rid, "Hel")
    win.open_settings()
    sent = win.engine.client.sent
    assert isinstance(sent[-2], P.Cancel) and isinstance(sent[-1], P.Load)
    done(win, rid, "cancelled")  # the reply's end arrives after the Load was sent
    win.engine._dispatch(P.Progress("loading", 1.0))
    win.engine._dispatch(loaded_event())
    assert "loading" not in win.state_label.text() and "idle" in win.state_label.text()
    msg = _last(win)
    assert msg.state == "interrupted" and msg.content == "Hel"
    assert win.message_view.widget_for(msg.id).state_label.text() == "stopped: model reloaded"


def test_settings_needing_no_reload_do_not_touch_a_reply(win, monkeypatch) -> None:
    from app.ui.settings.dialog import SettingsDialog
    from app.ui.window import chat_flow

    monkeypatch.setattr(chat_flow, "ask_to_stop_for_reload", lambda parent: pytest.fail("asked"))
    monkeypatch.setattr(SettingsDialog, "exec", lambda self: 1)
    win.session.model_path = "/models/fake-Q4_K_M.gguf"
    send(win, "hi")
    win.open_settings()
    assert win.session.busy
    assert not any(isinstance(c, (P.Cancel, P.Load)) for c in win.engine.client.sent)


# ---------------------------------------------------------------- 2. failed load or connection
def test_a_failed_server_connection_keeps_the_local_model(win, qtbot) -> None:
    from fake_engine import FakeClient

    before = win.model_info.text()
    assert before.startswith("Q4_K_M")
    local = win.engine.client
    errors: list[P.Error] = []
    win.engine.error.connect(errors.append)
    win.connect_remote("http://127.0.0.1:1", api_key=None)  # nothing listens on port 1
    qtbot.waitUntil(lambda: bool(errors), timeout=30_000)
    assert isinstance(win.engine.client, FakeClient) and win.engine.client is local and local.alive
    assert win.engine.loaded_info is not None and win.engine.remote is None
    assert win.engine.state == "idle"
    assert win.model_info.text() == before
    assert "Still using fake model" in win.banner.text()
    rid = send(win, "still works")  # the local model answers
    assert isinstance(local.sent[-1], P.Generate) and local.sent[-1].request_id == rid


def test_a_failed_load_loads_the_previous_model_again(win) -> None:
    from fake_engine import loaded_event

    engine = win.engine
    win.load_model(Path("/models/fake-Q4_K_M.gguf"))
    engine._dispatch(loaded_event())
    win.load_model(Path("/models/broken.gguf"))
    assert engine.client.sent[-1].config.model_path == "/models/broken.gguf"
    engine._dispatch(P.Error(None, "load_failed", "not a GGUF file."))
    last = engine.client.sent[-1]
    assert isinstance(last, P.Load) and last.config.model_path == "/models/fake-Q4_K_M.gguf"
    assert "Loading fake-Q4_K_M.gguf again" in win.banner.text()
    engine._dispatch(loaded_event())
    assert win.session.model_path == "/models/fake-Q4_K_M.gguf"
    assert win.model_combo.currentData() == "/models/fake-Q4_K_M.gguf"
    assert win.banner.isVisibleTo(win)  # the reason stays on screen


# ---------------------------------------------------------------- the status bar's KV count
def test_status_bar_kv_follows_the_reply(win) -> None:
    win.engine._dispatch(P.Stats(rss_bytes=300 << 20, kv_cells_used=0, kv_cells_allocated=512,
                                    kv_bytes_used=0, kv_bytes_allocated=0, loaded=True))
    assert "KV 0/512" in win.status_line.part("memory")
    rid = send(win, "hi")
    win.engine._dispatch(P.Prefilled(rid, prompt_tokens=20, prefill_tokens=20, prefill_ms=5.0, ttft_ms=6.0,
                                        kv_cells_used=20, kv_bytes_used=0, kv_bytes_per_cell=0.0))
    tokens(win, rid, "a", "b", "c", "d")
    win.dashboard._refresh_live()
    assert "KV 23/512" in win.status_line.part("memory") and "RSS" in win.status_line.part("memory")


def test_a_server_that_answers_takes_over_and_the_status_bar_says_so(win, qtbot, monkeypatch) -> None:
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
    win.engine._dispatch(P.Stats(rss_bytes=300 << 20, kv_cells_used=0, kv_cells_allocated=512,
                                    kv_bytes_used=0, kv_bytes_allocated=0, loaded=True))
    local = win.engine.client
    send(win, "hi")
    reply_id = win.session.streaming_message_id
    win.connect_remote("http://127.0.0.1:9")
    qtbot.waitUntil(lambda: win.engine.remote is not None, timeout=5000)
    assert isinstance(win.engine.client, AnsweringServer) and not local.alive
    assert win.status_line.part("memory") == "memory: on the server"  # not the local engine's last numbers
    assert not win.session.busy  # the local engine's unfinished reply ended with it
    assert win.store.message(reply_id).state == "interrupted"


def test_a_model_chosen_while_a_server_connects_wins(win, qtbot, monkeypatch) -> None:
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
    local = win.engine.client
    win.connect_remote("http://127.0.0.1:9")
    win.load_model(Path("/models/fake-Q4_K_M.gguf"))  # changed their mind before the server answered
    release.set()
    assert answered.wait(10)
    qtbot.wait(200)  # the late answer reaches the GUI thread now: it must change nothing
    assert win.engine.client is local and win.engine.remote is None
    assert win.engine.loaded_info.chat_template_source != "server"
    assert win.model_info.text() == "loading…"
    win.engine._dispatch(loaded_event())
    assert win.engine.loaded_info.model_path == "/models/fake-Q4_K_M.gguf"
