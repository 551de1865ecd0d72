"""A reasoning model's thinking, shown collapsed above its answer.

A one-line toggle ("Thought for 3.2 s · 120 tokens", or "Thinking…" while it streams) opens the thinking
text. The text is a model's, so it is shown as plain text: a QPlainTextEdit never interprets markup, so
nothing in it can make Qt load a resource (see app.ui.toolkit.safe_text).
"""

from __future__ import annotations

from typing import Any

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QPlainTextEdit, QToolButton, QVBoxLayout, QWidget

from app.core.chat.store import Message

MAX_HEIGHT = 240  # a long thinking scrolls inside its box instead of pushing the answer away


def summary(reasoning: str, state: str, metrics: dict[str, Any] | None) -> str:
    """The toggle's line: live while the reply streams, then time and token count from the metrics."""
    if state == "streaming":
        return "Thinking…"
    metrics = metrics or {}
    parts = []
    ms = metrics.get("reasoning_ms")
    if isinstance(ms, (int, float)) and ms > 0:
        parts.append(f"{ms / 1000:.1f} s")
    tokens = metrics.get("reasoning_tokens")
    if isinstance(tokens, int) and tokens > 0:
        parts.append(f"{tokens} tokens")
    return "Thought for " + " · ".join(parts) if parts else "Thoughts"


class ThinkingBox(QWidget):
    """Hidden for replies without thinking; collapsed by default."""

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        lay = QVBoxLayout(self)
        lay.setContentsMargins(0, 0, 0, 0)
        lay.setSpacing(2)
        self.toggle = QToolButton()
        self.toggle.setCheckable(True)
        self.toggle.setAutoRaise(True)
        self.toggle.setToolButtonStyle(Qt.ToolButtonStyle.ToolButtonTextBesideIcon)
        self.toggle.setArrowType(Qt.ArrowType.RightArrow)
        self.toggle.setToolTip("Show or hide the model's thinking before its answer")
        self.toggle.toggled.connect(self._set_expanded)
        lay.addWidget(self.toggle, 0, Qt.AlignmentFlag.AlignLeft)
        self.text_view = QPlainTextEdit()
        self.text_view.setReadOnly(True)
        self.text_view.setMaximumHeight(MAX_HEIGHT)
        self.text_view.hide()
        lay.addWidget(self.text_view)
        self.reasoning = ""
        self._state = "complete"
        self.hide()

    @property
    def expanded(self) -> bool:
        return self.toggle.isChecked()

    def show_message(self, message: Message) -> None:
        self._state = message.state
        if message.reasoning != self.reasoning:
            self.reasoning = message.reasoning
            self.text_view.setPlainText(self.reasoning)
        self.toggle.setText(summary(self.reasoning, message.state, message.metrics))
        self.setVisible(bool(self.reasoning))

    def append(self, text: str) -> None:
        """Thinking streams in: shown under a live "Thinking…" toggle."""
        self.reasoning += text
        self.text_view.moveCursor(self.text_view.textCursor().MoveOperation.End)
        self.text_view.insertPlainText(text)
        self.toggle.setText("Thinking…")
        self.setVisible(bool(self.reasoning))

    def _set_expanded(self, on: bool) -> None:
        self.toggle.setArrowType(Qt.ArrowType.DownArrow if on else Qt.ArrowType.RightArrow)
        self.text_view.setVisible(on)


def connect_thinking(session: Any, view: Any) -> None:
    """Stream a ChatSession's thinking into a MessageView's message widgets as it arrives."""

    def on_reasoning(message_id: int, text: str) -> None:
        widget = view.widget_for(message_id)
        if widget is not None:
            widget.thinking.append(text)

    session.stream_reasoning.connect(on_reasoning)
