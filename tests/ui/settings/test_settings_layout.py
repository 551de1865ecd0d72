"""The Settings dialog as the context field is typed in: the lines under it (its memory cost, its decode speed as it
fills, why it does not fit) show their whole text at every value, and the dialog keeps its size and OK its place.
Both went wrong together: the wrapped speed line kept the height of its previous text and lost its last line,
while the dialog grew and shrank around it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from PySide6.QtCore import QPoint, QRect
from PySide6.QtWidgets import QApplication, QDialogButtonBox, QLabel

from app.core.bench.zoo import zoo_path
from app.core.chat.model_usage import MeasuredPoint, ModelUsage
from app.core.config.settings import Settings

pytestmark = pytest.mark.gui

# chats that reached 1.5k tokens: above 2k the speed line says what 2k would free (a third sentence)
USAGE = ModelUsage(replies=6, max_tokens=1500, points=[MeasuredPoint(800.0, 18.0)])


@pytest.fixture(scope="module")
def model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return zoo_path("llama-3.2-1b", "Q4_K_M", tmp_path_factory.mktemp("zoo"))


def _settle() -> None:
    for _ in range(5):
        QApplication.processEvents()


def _cut(label: QLabel) -> str | None:
    """How `label` loses text, if it does: less height than its whole text needs at its width."""
    if label.isVisible() and label.height() < label.heightForWidth(label.width()):
        return f"{label.text()!r}: {label.height()} px of {label.heightForWidth(label.width())}"
    return None


def test_the_context_lines_show_their_whole_text_and_ok_stays_put(qtbot: Any, model: Path) -> None:
    from app.ui.settings.dialog import SettingsDialog

    dlg = SettingsDialog(Settings(n_ctx=4096), model_path=str(model), usage=USAGE)
    qtbot.addWidget(dlg)
    dlg.show()
    qtbot.waitExposed(dlg)
    _settle()
    buttons = dlg.findChild(QDialogButtonBox)
    assert buttons is not None
    ok = buttons.button(QDialogButtonBox.StandardButton.Ok)
    placed = (QRect(ok.mapTo(dlg, QPoint(0, 0)), ok.size()), dlg.size())
    problem = dlg.checks.labels[dlg.n_ctx]  # "… tokens do not fit this machine …", under the field
    edit = dlg.n_ctx.lineEdit()
    seen_speed_lines = set()
    for typed in ("16384", "131072", "2048", "1048576", "512"):
        edit.selectAll()
        qtbot.keyClicks(edit, typed)  # as a user types it: every prefix ("1", "10", …) is a value too
        _settle()
        assert dlg.n_ctx.value() == int(typed)
        lost = [why for label in (dlg.ctx_cost, dlg.ctx_speed, dlg.gpu_cost, problem) if (why := _cut(label))]
        assert not lost, f"at {typed}: {lost}"
        assert (QRect(ok.mapTo(dlg, QPoint(0, 0)), ok.size()), dlg.size()) == placed, f"OK moved at {typed}"
        seen_speed_lines.add(dlg.ctx_speed.text().count("\n") + 1)
    assert problem.isHidden()  # 512 fits
    # the line did change length: what 2k would free, above the trained context, what a small one would cut
    assert len(seen_speed_lines) > 1
