"""The conversation view: one widget per message in a scroll area, so streaming re-renders only the reply
being written (cheap at 60 updates/s however long the conversation is), plus the input box."""

from __future__ import annotations

import html
import re

from PySide6.QtCore import Qt, QTimer, Signal
from PySide6.QtGui import (
    QGuiApplication,
    QTextBlockFormat,
    QTextCursor,
    QTextDocumentFragment,
)
from PySide6.QtWidgets import (
    QFrame,
    QHBoxLayout,
    QLabel,
    QScrollArea,
    QSizePolicy,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from app.core.chat.store import Message
from app.core.metrics.phase import PhaseMetrics
from app.ui.chat.code_blocks import COPY_SCHEME
from app.ui.chat.header_wrap import HeaderWrap
from app.ui.chat.markdown_render import close_open_fence, code_blocks, markdown_to_html, plain_to_html, stylesheet
from app.ui.chat.reply_ending import context_note, ending_of
from app.ui.chat.thinking_box import ThinkingBox
from app.ui.toolkit import theme
from app.ui.toolkit.fitted_text import FittedTextView
from app.ui.toolkit.focus_frame import show_focus
from app.ui.toolkit.safe_text import make_plain, set_plain_tooltip
from app.ui.toolkit.scroll_layout import lay_out_now

FULL_RENDER_CHARS = 6000  # re-render a finished reply as a whole below this size (≈ 15 ms on a 2-core VM, 2026-11-29)
# Streamed text that Markdown cannot give any meaning: letters, digits, spaces and sentence punctuation that
# no inline construct (emphasis, code, links, entities, escapes, HTML) starts or ends with.
_PLAIN_CHUNK = re.compile(r"[^\W_]*(?:[ ,.;:!?'][^\W_]*)*")
# A line whose block type (paragraph, list item, heading) is already settled by its start, and whose last
# character is plain text (after any emphasis/code/link has closed): appending plain words only adds text.
_SETTLED_LINE = re.compile(r" {0,3}(?:[^\W\d_]|[-+*#]|\d{1,9}[.)]).*[^\W_] *")
_SPACES = re.compile(r"[ \t]+")


def stable_prefix_length(text: str) -> int:
    """Length of the part of a streaming Markdown text that later tokens cannot change: everything up to
    the last blank line outside a fenced code block."""
    in_fence = False
    boundary = pos = 0
    for line in text.splitlines(keepends=True):
        stripped = line.strip()
        if stripped.startswith(("```", "~~~")):
            in_fence = not in_fence
        pos += len(line)
        if not in_fence and not stripped and line.endswith("\n"):
            boundary = pos
    return boundary


class MessageWidget(QFrame):
    edit_requested = Signal(int)  # message id
    fast_append = True  # tests turn it off to compare with the Markdown render of every update

    def __init__(self, message: Message, parent: QWidget | None = None, plain_only: bool = False):
        super().__init__(parent)
        self.message = message
        self.text = message.content
        # Plain text only: the conversation crashed the window while opening last time (see startup_guard),
        # or this message failed to render as Markdown; `render_note` says which, under the text.
        self.plain_only = plain_only
        self.render_note = "shown as plain text: this chat stopped the window while opening" if plain_only else ""
        # Streaming state: document position and text length where the unfinished tail starts.
        self._stable_pos: int | None = None
        self._stable_chars = 0
        self._stable_blocks = 0  # code blocks in the finished part (the next block's Copy index)
        self._stable_format = QTextBlockFormat()  # the last finished block's format, restored after removals
        self._type_plain_hits = 0  # updates that took the fast path (for tests and benchmarks)
        self.setObjectName("message")
        self.setFrameShape(QFrame.Shape.StyledPanel)
        lay = QVBoxLayout(self)
        lay.setContentsMargins(10, 6, 10, 6)
        lay.setSpacing(2)
        self.header = head = QHBoxLayout()  # app/ui/chat/version_nav.py adds ‹1/3› here
        self.role_label = QLabel("You" if message.role == "user" else "Model")
        font = self.role_label.font()
        font.setBold(True)
        self.role_label.setFont(font)
        head.addWidget(self.role_label)
        self.state_label = QLabel()
        make_plain(self.state_label)  # the state is ours, its tooltip (an error) is not: see _update_header
        head.addWidget(self.state_label)
        self.metrics_label = QLabel()
        self.metrics_label.setTextFormat(Qt.TextFormat.RichText)
        self.metrics_label.setAlignment(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
        # Never let the metrics line widen the message past the view (the body would be cut off instead of
        # wrapping); in a narrow window it is clipped, and its tooltip keeps the full summary.
        self.metrics_label.setMinimumWidth(1)
        self.metrics_label.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Preferred)
        head.addWidget(self.metrics_label, 1)
        self.edit_button: QToolButton | None = None
        if message.role == "user":
            self.edit_button = QToolButton()
            self.edit_button.setText("Edit")
            self.edit_button.setToolTip("Edit this message and send it again (later messages are replaced)")
            self.edit_button.setAutoRaise(True)
            self.edit_button.clicked.connect(lambda: self.edit_requested.emit(self.message.id))
            head.addWidget(self.edit_button)
        self.copy_button = QToolButton()
        self.copy_button.setText("Copy")
        self.copy_button.setToolTip("Copy this message's text (Markdown) to the clipboard")
        self.copy_button.setAutoRaise(True)
        self.copy_button.clicked.connect(self.copy_text)
        head.addWidget(self.copy_button)
        lay.addLayout(head)
        self.header_wrap = HeaderWrap(self, lay, head, self.metrics_label)  # metrics under the name when narrow
        self.context_label = QLabel()  # the chat's turns this reply's prompt left out to fit the context
        self.context_label.setWordWrap(True)
        make_plain(self.context_label)
        lay.addWidget(self.context_label)
        lay.addWidget(thinking := ThinkingBox())
        self.thinking = thinking  # a reasoning model's thinking, collapsed above the answer
        self.body = FittedTextView()
        self.body.copy_requested.connect(self.copy_code)
        self.copied_code: int | None = None  # the last code block copied (tests, status)
        lay.addWidget(self.body)
        self.restyle()
        self.set_message(message)

    def copy_code(self, index: int) -> None:
        """A code block's Copy link: its code, as the reply wrote it, on the clipboard."""
        blocks = code_blocks(self.text)
        clipboard = QGuiApplication.clipboard()
        if 0 <= index < len(blocks) and clipboard is not None:
            clipboard.setText(blocks[index])
            self.copied_code = index

    def copy_text(self) -> None:
        clipboard = QGuiApplication.clipboard()
        if clipboard is not None:
            clipboard.setText(self.text)

    def restyle(self) -> None:
        c = theme.colors()
        bg = c.user_bg if self.message.role == "user" else c.assistant_bg
        self.setStyleSheet(f"QFrame#message {{ background: {bg}; border: 1px solid {c.border}; "
                           f"border-radius: 8px; }}")
        self.body.document().setDefaultStyleSheet(stylesheet(c))
        # A Tab stop (its links open with the keyboard) drawn without a frame: a border only with the focus
        show_focus(self.body, quiet=False, base_css=FittedTextView.STYLE)
        self._render()
        self._update_header()  # its state and TTFT are coloured inline: in the theme's colours again

    def set_message(self, message: Message) -> None:
        # A long streamed reply is already on screen: a second full render would stall the GUI for nothing.
        # Short ones are rendered once more as a whole (a few ms) so they look exactly like reloaded ones.
        streamed_already = (self._stable_pos is not None and message.content == self.text
                            and len(self.text) > FULL_RENDER_CHARS)
        self.message = message
        self.text = message.content
        self.thinking.show_message(message)
        if not streamed_already:
            self._render()
        self._update_header()

    def append(self, text: str) -> None:
        """Streaming: re-render only the unfinished tail, so the cost does not grow with the reply; plain
        words added to a settled line are typed in directly (most updates: no Markdown, no HTML parse)."""
        before = self.text
        self.text += text
        if self.message.role == "user" or self.plain_only:
            self._render()
            return
        try:
            self._append_markdown(before, text)
        except Exception as exc:  # noqa: BLE001 (one reply that cannot render must not take the window)
            self._fall_back_to_plain(exc)

    def _append_markdown(self, before: str, text: str) -> None:
        if self._stable_pos is None:  # first streamed text: start from an empty document
            self._stable_pos, self._stable_chars, self._stable_blocks = 0, 0, 0
        elif self.fast_append and self._type_plain(before, text):
            return
        split = stable_prefix_length(self.text)
        if split > self._stable_chars:
            finished = markdown_to_html(self.text[self._stable_chars:split], self._stable_blocks)
            self._stable_pos = self._replace_tail(finished)
            self._stable_blocks += finished.count(f'href="{COPY_SCHEME}:')
            self._stable_chars = split
            self._stable_format = self.body.document().findBlock(self._stable_pos).blockFormat()
        tail = self.text[split:]
        self._replace_tail(markdown_to_html(tail, self._stable_blocks) if tail.strip() else "")

    def _type_plain(self, before: str, text: str) -> bool:
        """Add `text` to the document as the Markdown render of `before + text` would show it, when that is
        just more characters at the end of the last line (same block, same format); False when it may not be.

        Qt's HTML import shows a run of spaces as one (and none at a block's start), so what is typed is the
        difference between the two lines' visible forms."""
        if _PLAIN_CHUNK.fullmatch(text) is None:  # (no newline either)
            return False
        tail = before[self._stable_chars:]
        if "|" in tail:  # a table: its cells drop trailing spaces, a paragraph keeps one
            return False
        if close_open_fence(tail) != tail:  # inside a code block still open: its text is the <pre>'s, not a line's
            return False
        line = tail[tail.rfind("\n") + 1:]
        if _SETTLED_LINE.fullmatch(line) is None:
            return False
        heading = line.lstrip().startswith("#")  # Markdown drops a heading's trailing spaces, not a paragraph's
        end = line[-40:]  # the difference depends only on the line's end (a long paragraph is one line)
        if len(line) > 40 and end.strip():
            line = end
        shown = _SPACES.sub(" ", line.strip() if heading else line.lstrip())
        wanted = _SPACES.sub(" ", (line + text).strip() if heading else (line + text).lstrip())
        if not wanted.startswith(shown):
            return False
        self._type_plain_hits += 1
        if len(wanted) > len(shown):
            cursor = QTextCursor(self.body.document())
            cursor.movePosition(QTextCursor.MoveOperation.End)
            cursor.insertText(wanted[len(shown):])  # in the format of the plain character before it
        return True

    def _replace_tail(self, html: str) -> int:
        """Replace everything after the finished blocks with `html`; returns the document's end position."""
        assert self._stable_pos is not None
        doc = self.body.document()
        if self._stable_pos == 0:
            doc.setHtml(html)  # nothing finished yet: the whole document is the tail
        else:
            cursor = QTextCursor(doc)
            cursor.setPosition(self._stable_pos)
            cursor.movePosition(QTextCursor.MoveOperation.End, QTextCursor.MoveMode.KeepAnchor)
            cursor.removeSelectedText()
            # Removing across blocks can leave the last finished block with the removed block's format
            # (a code block's empty last line turned white on the second token): put its own back.
            cursor.setBlockFormat(self._stable_format)
            if html:
                # The fragment's first block merges into the block at the cursor (the last finished one),
                # so lead with a paragraph holding one invisible no-break space: that is what merges, and
                # the real blocks keep their own formats (code background, list indents).
                cursor.insertFragment(QTextDocumentFragment.fromHtml("<p>&nbsp;</p>" + html, doc))
        end = QTextCursor(doc)
        end.movePosition(QTextCursor.MoveOperation.End)
        return end.position()

    def _render(self) -> None:
        self._stable_pos = None
        if self.message.role == "user" or self.plain_only:
            self.body.setHtml(plain_to_html(self.text) + self._note_html())
            return
        try:
            self.body.setHtml(markdown_to_html(self.text) if self.text else "<p>…</p>")
        except Exception as exc:  # noqa: BLE001 (stored text must never keep a chat from opening)
            self._fall_back_to_plain(exc)

    def _fall_back_to_plain(self, exc: BaseException) -> None:
        self.plain_only = True
        self.render_note = f"shown as plain text: it could not be rendered ({type(exc).__name__})"
        self._stable_pos = None
        self.body.setHtml(plain_to_html(self.text) + self._note_html())

    def _note_html(self) -> str:
        if not self.render_note:
            return ""
        return f"<p style='color:{theme.colors().muted}'><i>({html.escape(self.render_note)})</i></p>"

    def _update_header(self) -> None:
        try:
            self._show_header()
        except Exception:  # noqa: BLE001 (metrics from a damaged store: the message shows without them)
            self.metrics_label.setText("")
            self.metrics_label.setToolTip("")

    def _show_header(self) -> None:
        m = self.message
        c = theme.colors()
        ending = ending_of(m)
        self.state_label.setStyleSheet(f"color: {c.warn if ending.warn else c.muted};")
        set_plain_tooltip(self.state_label, ending.tooltip)  # may hold an error from an engine, template or server
        self.state_label.setText(ending.label)
        # While a reply is written (a continued one too) its numbers are not known yet: the ones stored are
        # its earlier part's, and would read as this part's.
        finished = m.state != "streaming"
        note = context_note(m) if finished else ""
        self.context_label.setText(note)
        self.context_label.setStyleSheet(f"color: {c.warn};")
        self.context_label.setVisible(bool(note))
        if m.metrics and finished:
            pm = PhaseMetrics.from_dict(m.metrics)
            if pm.source.startswith("client-side"):  # a remote server: only what the client saw
                self.metrics_label.setText(
                    f"<span style='color:{c.muted}'>TTFT {pm.ttft_ms:.0f} ms (client-side)</span> · "
                    f"<span style='color:{theme.DECODE}'>decode {pm.decode_tps:.1f} tok/s</span>")
            else:
                self.metrics_label.setText(
                    f"<span style='color:{c.muted}'>TTFT {pm.ttft_ms:.0f} ms</span> · "
                    f"<span style='color:{theme.PREFILL}'>{pm.prefill_short}</span> · "
                    f"<span style='color:{theme.DECODE}'>decode {pm.decode_tps:.1f} tok/s</span>")
            # a remote server's numbers left out (not counts, not plausible), one line each, as the CLI prints them
            notes = [f"note    : {n}" for n in m.metrics.get("server_notes") or [] if isinstance(n, str)]
            set_plain_tooltip(self.metrics_label, "\n".join(pm.summary_lines() + notes))
        else:
            self.metrics_label.setText("")
            self.metrics_label.setToolTip("")


class MessageView(QScrollArea):
    """Vertical list of MessageWidgets; keeps the bottom in view while streaming if it was in view."""

    edit_requested = Signal(int)

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        self.setWidgetResizable(True)
        self.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.setFrameShape(QFrame.Shape.NoFrame)
        self._inner = QWidget()
        self._layout = QVBoxLayout(self._inner)
        self._layout.setContentsMargins(12, 12, 12, 12)
        self._layout.setSpacing(8)
        self._placeholder = QLabel("Type a message below and press Enter.\n"
                                   "The dashboard on the right shows prefill and decode as they happen.")
        self._placeholder.setAlignment(Qt.AlignmentFlag.AlignCenter)
        self._placeholder.setWordWrap(True)  # one line each, it was cut at the sides of an 800 px window's chat
        self._placeholder.setStyleSheet(f"color: {theme.colors().muted};")
        self._layout.addWidget(self._placeholder)
        self._layout.addStretch(1)
        self.setWidget(self._inner)
        self._widgets: dict[int, MessageWidget] = {}
        self.plain_only = False  # new messages shown as plain text (a chat that crashed the last start)
        self._stick = True
        self.verticalScrollBar().rangeChanged.connect(self._on_range)
        self.verticalScrollBar().valueChanged.connect(self._on_scroll)

    def _on_scroll(self, value: int) -> None:
        self._stick = value >= self.verticalScrollBar().maximum() - 24

    def _on_range(self, _lo: int, hi: int) -> None:
        if self._stick:
            self.verticalScrollBar().setValue(hi)

    def clear(self) -> None:
        for w in self._widgets.values():
            w.setParent(None)
            w.deleteLater()
        self._widgets.clear()
        self._placeholder.show()

    def set_messages(self, messages: list[Message]) -> None:
        self.clear()
        for m in messages:
            self.add_message(m)
        lay_out_now(self)  # at the width it is shown at: not the previous chat's, until the next resize
        self._stick = True
        QTimer.singleShot(0, self, lambda: self.verticalScrollBar().setValue(self.verticalScrollBar().maximum()))

    def add_message(self, message: Message) -> MessageWidget:
        self._placeholder.hide()
        w = MessageWidget(message, plain_only=self.plain_only)
        w.edit_requested.connect(self.edit_requested)
        self._layout.insertWidget(self._layout.count() - 1, w)
        self._widgets[message.id] = w
        self._stick = True
        return w

    def remove_from(self, message_id: int) -> None:
        for mid in [m for m in self._widgets if m >= message_id]:
            w = self._widgets.pop(mid)
            w.setParent(None)
            w.deleteLater()
        if not self._widgets:
            self._placeholder.show()

    def append_text(self, message_id: int, text: str) -> None:
        w = self._widgets.get(message_id)
        if w is not None:
            w.append(text)

    def update_message(self, message: Message) -> None:
        w = self._widgets.get(message.id)
        if w is not None:
            w.set_message(message)

    def widget_for(self, message_id: int) -> MessageWidget | None:
        return self._widgets.get(message_id)

    def message_ids(self) -> list[int]:
        return list(self._widgets)

    def restyle(self) -> None:
        self._placeholder.setStyleSheet(f"color: {theme.colors().muted};")
        for w in self._widgets.values():
            w.restyle()
