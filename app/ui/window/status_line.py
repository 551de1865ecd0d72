"""The status bar's right-hand line: the server being served, the latest reply's speed and the engine's memory,
each a part that its owner sets, shown as one text with " · " between the parts that have something to say.

Each part used to be a label of its own, side by side: they read as one sentence with its separator missing
("…/v1 · 0 in flight engine RSS 312 MiB"). One line built by one join has a separator wherever two parts meet,
whichever of them are shown. Where the window is too narrow for the whole line, it drops whole parts from its end
(the memory's first: app.ui.toolkit.whole_parts_label) rather than cut a number or widen the window; the
tooltip has the whole line."""

from __future__ import annotations

from collections.abc import Iterable

from PySide6.QtWidgets import QWidget

from app.ui.toolkit.safe_text import set_plain_tooltip
from app.ui.toolkit.whole_parts_label import SEPARATOR, WholePartsLabel

PARTS = ("serve", "speed", "memory")  # left to right


def join_parts(parts: Iterable[str]) -> str:
    """The parts that have text, in their order, with one separator between two of them."""
    return SEPARATOR.join(text for text in (part.strip() for part in parts) if text)


class StatusLine(WholePartsLabel):
    """One plain-text label (a URL from a process's output is never markup); `set_part(name, text)` changes one
    part (empty: the part says nothing)."""

    def __init__(self, parent: QWidget | None = None):
        super().__init__("", parent)
        self._texts = dict.fromkeys(PARTS, "")
        self._tips = dict.fromkeys(PARTS, "")
        self.hide()

    def set_part(self, name: str, text: str, tip: str | None = None) -> None:
        """Part `name` says `text` (with `tip` in the line's tooltip while it says something; None keeps the
        part's tip)."""
        if name not in self._texts:
            raise KeyError(name)
        self._texts[name] = text
        if tip is not None:
            self._tips[name] = tip
        self._show()

    def part(self, name: str) -> str:
        return self._texts[name]

    def _show(self) -> None:
        text = join_parts(self._texts.values())
        if text != self.full_text():
            self.setText(text)
        tips = [self._tips[n] for n in PARTS if self._texts[n].strip() and self._tips[n]]
        set_plain_tooltip(self, "\n".join([text, *tips]) if text else "")
        self.setVisible(bool(text))
