"""Exporting from the window (issue 32, item 9): the file's name decides its format whatever filter is
chosen, a remote model's reply is headed by its model and server, and the next export opens where the last
one went, even in a window opened later."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from PySide6.QtWidgets import QFileDialog

from app.core.chat.store import ChatStore
from app.core.config import settings as settings_mod
from fake_window import make_window

pytestmark = pytest.mark.gui

MARKDOWN = "Markdown (*.md)"


def _remote_chat(store: ChatStore) -> int:
    conv = store.create_conversation("Demo")
    store.add_message(conv.id, "user", "hi")
    reply = store.add_message(conv.id, "assistant", "hello", model="http://127.0.0.1:8081/v1 (model fake-thinker)")
    store.update_message(reply.id, state="complete", finish_reason="stop")
    return conv.id


def click_chat(qtbot, win, cid: int) -> None:
    """The chat's row in the sidebar, clicked (the list reloaded first: the chat was written to the store)."""
    from PySide6.QtCore import Qt

    lst = win.conversations
    lst.reload()
    index = lst.model.index(lst.model.row_of(cid))
    lst.view.scrollTo(index)
    qtbot.mouseClick(lst.view.viewport(), Qt.MouseButton.LeftButton, pos=lst.view.visualRect(index).center())
    assert win.session.conversation is not None and win.session.conversation.id == cid


class SaveDialog:
    """QFileDialog.getSaveFileName as a user answers it: the folder it opened in is kept."""

    def __init__(self, answer: tuple[str, str]):
        self.answer = answer
        self.opened_at: list[Path] = []

    def __call__(self, parent, caption, start, filters, *a, **k):
        self.opened_at.append(Path(start).parent)
        return self.answer


def test_the_typed_name_decides_the_format(qtbot, window, monkeypatch, tmp_path: Path) -> None:
    cid = _remote_chat(window.store)
    click_chat(qtbot, window, cid)
    monkeypatch.setattr(QFileDialog, "getSaveFileName", SaveDialog((str(tmp_path / "demo.json"), MARKDOWN)))
    window.menus.export_chat.trigger()  # File ▸ Export chat…, the filter left on Markdown
    data = json.loads((tmp_path / "demo.json").read_text(encoding="utf-8"))
    assert [m["content"] for m in data["messages"]] == ["hi", "hello"]
    assert "as JSON" in window.banner.text()


def test_a_remote_reply_is_headed_by_its_model_and_server(qtbot, window, monkeypatch, tmp_path: Path) -> None:
    cid = _remote_chat(window.store)
    click_chat(qtbot, window, cid)
    monkeypatch.setattr(QFileDialog, "getSaveFileName", SaveDialog((str(tmp_path / "demo"), MARKDOWN)))
    window.menus.export_chat.trigger()
    md = (tmp_path / "demo.md").read_text(encoding="utf-8")
    assert "## Model (fake-thinker on 127.0.0.1:8081)\n" in md
    assert "v1 (model" not in md


def test_the_next_export_opens_in_the_last_folder(qtbot, monkeypatch, tmp_path: Path) -> None:
    elsewhere = tmp_path / "exports"
    elsewhere.mkdir()
    monkeypatch.chdir(tmp_path)  # the process's folder is not where a user wants to land
    store = ChatStore(tmp_path / "chats.sqlite3")
    cid = _remote_chat(store)
    first = make_window(qtbot, store=store)
    first.show()
    click_chat(qtbot, first, cid)
    dialog = SaveDialog((str(elsewhere / "one.md"), MARKDOWN))
    monkeypatch.setattr(QFileDialog, "getSaveFileName", dialog)
    first.menus.export_chat.trigger()
    assert dialog.opened_at[0] != tmp_path and dialog.opened_at[0].is_dir()  # documents, or home
    first.menus.export_chat.trigger()
    assert dialog.opened_at[1] == elsewhere
    first.close()
    later = make_window(qtbot, store=store, settings=settings_mod.load_settings().settings)  # the next start
    later.show()
    click_chat(qtbot, later, cid)
    later.menus.export_chat.trigger()
    assert dialog.opened_at[2] == elsewhere
    later.close()
    store.close()
