"""Chat export: Markdown and JSON from the store (thinking marked apart, metrics in JSON), and the window's
Export… from the chat list (a save dialog; a failing write says why in one line)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from app.core.chat import export as chat_export
from app.core.chat.store import ChatStore
from app.core.metrics.phase import PhaseMetrics


def _chat(store: ChatStore) -> int:
    conv = store.create_conversation("Colours / ```fences```", system_prompt="Be brief.")
    store.add_message(conv.id, "user", "Name a colour")
    reply = store.add_message(conv.id, "assistant", "**Red**.", model="/models/tiny-Q4_K_M.gguf")
    store.update_message(reply.id, reasoning="They want one.\n```\nnot a fence end", state="complete",
                         finish_reason="stop", metrics=PhaseMetrics(prompt_tokens=7, decode_tokens=3).to_dict())
    return conv.id


def test_markdown_marks_the_thinking_apart_and_json_keeps_metrics(tmp_path) -> None:
    store = ChatStore(tmp_path / "c.db")
    cid = _chat(store)
    conv, msgs = store.conversation(cid), store.messages(cid)
    assert conv is not None
    md = chat_export.to_markdown(conv, msgs)
    assert md.startswith("# Colours / ```fences```\n")
    assert "## You\n\nName a colour\n" in md
    assert "## Model (tiny-Q4_K_M.gguf)\n" in md
    thinking = md.split("<details><summary>Thinking</summary>")[1].split("</details>")[0]
    assert "They want one." in thinking and "**Red**" not in thinking
    assert "````text\n" in thinking  # a fence longer than the ``` inside the thinking
    assert md.rstrip().endswith("**Red**.")
    assert "Be brief." in md
    data = json.loads(chat_export.to_json(conv, msgs))
    assert data["format"] == "roofline-chat/1" and data["system_prompt"] == "Be brief."
    user, reply = data["messages"]
    assert user == {"role": "user", "content": "Name a colour", "created": msgs[0].created}
    assert reply["content"] == "**Red**." and reply["reasoning"].startswith("They want one.")
    assert reply["metrics"]["prompt_tokens"] == 7 and reply["finish_reason"] == "stop"


def test_write_is_whole_or_nothing_and_names_the_reason(tmp_path) -> None:
    store = ChatStore(tmp_path / "c.db")
    cid = _chat(store)
    conv, msgs = store.conversation(cid), store.messages(cid)
    assert conv is not None
    target = tmp_path / "out.json"
    chat_export.write(target, "json", conv, msgs)
    assert json.loads(target.read_text(encoding="utf-8"))["title"] == conv.title
    with pytest.raises(OSError):
        chat_export.write(tmp_path / "missing" / "out.md", "md", conv, msgs)
    assert not list(tmp_path.rglob("*.tmp"))
    assert chat_export.suggested_name(conv, "md") == "Colours _ ___fences___.md"


@pytest.mark.gui
@pytest.mark.qt_log_ignore("This plugin does not support propagateSizeHints")
def test_export_from_the_chat_list(qtbot, tmp_path: Path, monkeypatch) -> None:
    from fake_engine import fake_engine
    from PySide6.QtWidgets import QFileDialog

    from app.core.config.settings import LoadResult, Settings
    from app.ui.window.main_window import MainWindow

    store = ChatStore(tmp_path / "chats.sqlite3")
    cid = _chat(store)
    win = MainWindow(store=store, settings_result=LoadResult(Settings()), engine=fake_engine())
    qtbot.addWidget(win)
    win.measure_bandwidth_on_load = False
    answers = iter([(str(tmp_path / "colours"), "JSON with metrics (*.json)"),
                    (str(tmp_path / "no-such-dir" / "x.md"), "Markdown (*.md)"), ("", "")])
    monkeypatch.setattr(QFileDialog, "getSaveFileName", lambda *a, **k: next(answers))
    win.conversations.select(cid)
    win.conversations.export_current()  # as the context menu's Export… does
    written = tmp_path / "colours.json"
    assert json.loads(written.read_text(encoding="utf-8"))["messages"][1]["metrics"]["decode_tokens"] == 3
    assert win.banner.label.text().startswith("Exported “Colours")
    line = win.exports.export(cid)
    assert line is not None and line.startswith("Could not export") and "No such file or directory" in line
    assert "\n" not in line and win.banner.label.text() == line
    assert win.exports.export(cid) is None  # cancelled: nothing said
    win.close()
    store.close()


@pytest.mark.gui
@pytest.mark.qt_log_ignore("This plugin does not support propagateSizeHints")
def test_file_menu_exports_the_chat_on_screen(qtbot, tmp_path: Path, monkeypatch) -> None:
    from fake_engine import fake_engine
    from PySide6.QtWidgets import QFileDialog

    from app.core.config.settings import LoadResult, Settings
    from app.ui.window.main_window import MainWindow

    store = ChatStore(tmp_path / "chats.sqlite3")
    _chat(store)
    win = MainWindow(store=store, settings_result=LoadResult(Settings()), engine=fake_engine())
    qtbot.addWidget(win)
    win.measure_bandwidth_on_load = False
    monkeypatch.setattr(QFileDialog, "getSaveFileName", lambda *a, **k: (str(tmp_path / "menu.md"), "Markdown (*.md)"))
    win.menus.export_chat.trigger()
    assert (tmp_path / "menu.md").read_text(encoding="utf-8").startswith("# Colours")
    win.close()
    store.close()
