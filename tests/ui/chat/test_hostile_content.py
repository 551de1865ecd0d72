"""Replies, errors and model files cannot make the view load, open or interpret anything (issue: a reply holding
`![x](/dev/zero)` aborted the window at every start; a link's text faked its target; HTML in an error was
rendered by the banner and by tooltips)."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

from PySide6 import QtGui
from PySide6.QtCore import QObject, Qt, QUrl, Slot
from PySide6.QtGui import QDesktopServices, QImage, QTextCursor, QTextDocument, QTextImageFormat

from app.core.chat.store import ChatStore, Message
from app.ui.chat.message_view import MessageWidget
from fake_window import make_window

HTML_ERROR = '<b>bold</b> <img src="{img}"> <a href="file:///etc/hostname">x</a>'


def _reply(text: str, state: str = "complete", error: str | None = None) -> Message:
    now = time.time()
    return Message(1, 1, "assistant", text, state, None, None, None, error, now, now)


def _images_in(doc: QTextDocument) -> list[str]:
    names = []
    block = doc.begin()
    while block.isValid():
        it = block.begin()
        while not it.atEnd():
            fmt = it.fragment().charFormat()
            if fmt.isImageFormat():
                names.append(QTextImageFormat(fmt).name())
            it += 1
        block = block.next()
    return names


def _picture(tmp_path: Path) -> Path:
    image = QImage(40, 30, QImage.Format.Format_RGB32)
    image.fill(0x336699)
    path = tmp_path / "secret.png"
    image.save(str(path))
    return path


def test_images_in_a_reply_are_never_loaded_and_show_their_alt_text(qtbot, tmp_path: Path) -> None:
    pic = _picture(tmp_path)
    text = (f"Look: ![a chart]({pic}) and ![local]({pic.as_uri()}) and "
            "![inline](data:image/png;base64,iVBORw0KGgo=) and ![remote](https://example.com/x.png) end")
    widget = MessageWidget(_reply(text))
    qtbot.addWidget(widget)
    doc = widget.body.document()
    shown = doc.toPlainText()
    assert _images_in(doc) == []
    for alt in ("a chart", "local", "inline", "remote"):
        assert f"[image: {alt}]" in shown
    assert f"not loaded: {pic}" in shown
    # Whatever HTML reaches the view, the document gets an empty placeholder, never the file.
    widget.body.setHtml(f'<p><img src="{pic}"><img src="{pic.as_uri()}"></p>')
    for name in (str(pic), pic.as_uri()):
        resource = doc.resource(QTextDocument.ResourceType.ImageResource.value, QUrl(name))
        assert not isinstance(resource, QImage) or resource.size().width() <= 1, name
    # Measuring at another width lays out a copy of the document: its images come from the view too.
    asked = widget.body.resources_refused
    widget.body.heightForWidth(widget.body.width() + 37)
    assert widget.body.resources_refused > asked


def test_a_store_holding_hostile_replies_opens(tmp_path: Path, roofline_home: Path) -> None:
    """`![x](/dev/zero)` made QTextBrowser read /dev/zero until std::bad_alloc aborted the window."""
    data = roofline_home / "data"
    data.mkdir(parents=True, exist_ok=True)
    store = ChatStore(data / "chats.sqlite3")
    conv = store.create_conversation("hostile")
    store.add_message(conv.id, "user", "show me")
    reply = store.add_message(conv.id, "assistant", "![x](/dev/zero) and [https://docs.python.org](file:///etc/hostname)"
                                                    " <img src=/dev/zero>")
    store.update_message(reply.id, state="error", error=HTML_ERROR.format(img="/dev/zero"))
    store.close()
    env = {**os.environ, "QT_QPA_PLATFORM": "offscreen", "ROOFLINE_DEFAULT_MODEL": str(tmp_path / "none.gguf")}
    result = subprocess.run([sys.executable, "-m", "app.cli", "gui", "--quit-after", "2"], env=env,
                            capture_output=True, text=True, timeout=120, check=False)
    assert result.returncode == 0, result.stderr[-3000:]


class _UrlRecorder(QObject):
    def __init__(self) -> None:
        super().__init__()
        self.urls: list[str] = []

    @Slot(QUrl)
    def handle(self, url: QUrl) -> None:
        self.urls.append(url.toString())


def _click_text(qtbot, widget: MessageWidget, needle: str) -> None:  # type: ignore[no-untyped-def]
    doc = widget.body.document()
    found = doc.find(needle)
    assert not found.isNull(), needle
    cursor = QTextCursor(doc)
    cursor.setPosition(found.selectionStart() + 1)
    pos = widget.body.cursorRect(cursor).center()
    qtbot.mouseClick(widget.body.viewport(), Qt.MouseButton.LeftButton, pos=pos)


def test_links_open_only_web_addresses_on_click_and_show_their_real_target(qtbot) -> None:
    recorder = _UrlRecorder()
    schemes = ("http", "https", "file", "javascript", "mailto")
    for scheme in schemes:
        QDesktopServices.setUrlHandler(scheme, recorder, "handle")
    try:
        text = ("Read [https://docs.python.org](file:///etc/hostname) or [clickme](javascript:alert(1)) "
                "or [the docs](https://docs.python.org/3/) now.")
        widget = MessageWidget(_reply(text))
        qtbot.addWidget(widget)
        widget.resize(700, 300)
        widget.show()
        qtbot.waitExposed(widget)
        shown = widget.body.document().toPlainText()
        assert "file:///etc/hostname" in shown  # the real target, beside the text that claimed another
        assert "the docs (docs.python.org)" in shown
        _click_text(qtbot, widget, "https://docs.python.org")  # the file: link's text
        _click_text(qtbot, widget, "clickme")
        qtbot.wait(50)
        assert recorder.urls == []
        assert widget.body.source().isEmpty()  # nothing was opened inside the view either
        assert "Read https://docs.python.org" in widget.body.document().toPlainText()
        _click_text(qtbot, widget, "the docs")
        qtbot.waitUntil(lambda: recorder.urls == ["https://docs.python.org/3/"], timeout=2000)
    finally:
        for scheme in schemes:
            QDesktopServices.unsetUrlHandler(scheme)


def _shown_as(tooltip: str) -> str:
    """What a tooltip displays: Qt renders it as rich text when it looks like HTML."""
    if QtGui.Qt.mightBeRichText(tooltip):  # QtGui's Qt namespace carries the sniffing function
        doc = QTextDocument()
        doc.setHtml(tooltip)
        return doc.toPlainText()
    return tooltip


def test_error_text_in_a_tooltip_is_shown_literally(qtbot) -> None:
    error = HTML_ERROR.format(img="missing.png")
    widget = MessageWidget(_reply("partial", state="error", error=error))
    qtbot.addWidget(widget)
    assert _shown_as(widget.state_label.toolTip()) == error


def test_banner_shows_html_as_text(qtbot) -> None:
    from app.ui.window.banner import Banner

    banner = Banner()
    qtbot.addWidget(banner)
    error = HTML_ERROR.format(img="missing.png")
    banner.show_message(f"Could not load the model: {error}")
    assert banner.label.textFormat() == Qt.TextFormat.PlainText
    assert banner.text().endswith(error)


def test_model_names_and_engine_errors_reach_the_window_as_text(qtbot, tmp_path: Path) -> None:
    from app.engine import protocol as P
    from fake_engine import fake_engine

    hostile = HTML_ERROR.format(img="missing.png")
    store = ChatStore(tmp_path / "chats.sqlite3")
    engine = fake_engine(model_desc=hostile, template="<i>tpl</i>")
    win = make_window(qtbot, store=store, engine=engine)
    engine.loaded.emit(engine.loaded_info)
    assert win.model_info.textFormat() == Qt.TextFormat.PlainText and "<i>tpl</i>" in win.model_info.full_text()
    assert _shown_as(win.model_info.toolTip()).split("\n")[1].startswith(hostile)  # after the whole line
    engine._dispatch(P.Error(None, "engine_died", hostile, fatal=True))
    assert win.banner.label.textFormat() == Qt.TextFormat.PlainText
    assert _shown_as(win.banner.label.toolTip()) == hostile
    win.close()
    store.close()


def test_chat_store_and_its_wal_are_private(tmp_path: Path) -> None:
    folder = tmp_path / "data"
    old = os.umask(0o022)
    try:
        store = ChatStore(folder / "chats.sqlite3")
        conv = store.create_conversation("x")
        store.add_message(conv.id, "user", "secret")
        modes = {p.name: p.stat().st_mode & 0o777 for p in folder.iterdir()}
        store.close()
    finally:
        os.umask(old)
    assert set(modes) >= {"chats.sqlite3", "chats.sqlite3-wal", "chats.sqlite3-shm"}
    assert set(modes.values()) == {0o600}, modes
    # A store an older version created readable by others is tightened when opened.
    legacy = tmp_path / "legacy.sqlite3"
    sqlite3.connect(legacy).close()
    legacy.chmod(0o644)
    ChatStore(legacy).close()
    assert legacy.stat().st_mode & 0o777 == 0o600


def test_chat_titles_show_literally_in_the_list_tooltip(qtbot, tmp_path: Path) -> None:
    from app.ui.chat.conversation_list import ConversationPanel

    store = ChatStore(tmp_path / "chats.sqlite3")
    title = HTML_ERROR.format(img="missing.png")
    store.create_conversation(title)
    panel = ConversationPanel(store)
    qtbot.addWidget(panel)
    panel.reload()
    index = panel.view.model().index(0, 0)
    assert index.data() == title
    assert _shown_as(index.data(Qt.ItemDataRole.ToolTipRole)).startswith(title + "\n")
    store.close()
