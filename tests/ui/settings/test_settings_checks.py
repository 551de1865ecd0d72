"""The Settings dialog checks its fields as the user types: the reason under the field, OK disabled while
one stands, and both gone once the text is fixed."""

from __future__ import annotations

from pathlib import Path

import pytest
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QDialogButtonBox

from app.core.config.settings import Settings

pytestmark = pytest.mark.gui


@pytest.fixture
def dialog(qtbot):
    from app.ui.settings.dialog import SettingsDialog

    dlg = SettingsDialog(Settings())
    qtbot.addWidget(dlg)
    dlg.show()
    return dlg


def ok_button(dlg):
    return dlg.findChild(QDialogButtonBox).button(QDialogButtonBox.StandardButton.Ok)


def type_into(qtbot, spin, text: str) -> None:
    edit = spin.lineEdit()
    edit.selectAll()
    edit.del_()
    qtbot.keyClicks(edit, text)


def test_context_size_below_its_minimum_says_why_as_typed(dialog, qtbot) -> None:
    assert ok_button(dialog).isEnabled()
    type_into(qtbot, dialog.n_ctx, "12")  # on its way to 128? the field takes 256 and up
    reason = dialog.checks.labels[dialog.n_ctx]
    assert reason.isVisible() and "256" in reason.text()
    assert not ok_button(dialog).isEnabled()
    type_into(qtbot, dialog.n_ctx, "8192")
    assert not reason.isVisible()
    assert ok_button(dialog).isEnabled()


def test_sampling_field_in_settings_says_why(dialog, qtbot) -> None:
    type_into(qtbot, dialog.sampling.max_tokens, "0")
    reason = dialog.checks.labels[dialog.sampling.max_tokens]
    assert reason.isVisible() and "1 to 1000000" in reason.text()
    assert not ok_button(dialog).isEnabled()


def test_quantized_kv_with_flash_off_is_said_at_once(dialog) -> None:
    dialog.kv_type.setCurrentIndex(dialog.kv_type.findData("q8_0"))
    dialog.flash.setCurrentIndex(dialog.flash.findData(False))
    reason = dialog.checks.labels[dialog.flash]
    assert reason.isVisible() and "flash attention" in reason.text()
    assert not ok_button(dialog).isEnabled()
    dialog.flash.setCurrentIndex(0)  # auto
    assert not reason.isVisible() and ok_button(dialog).isEnabled()


def test_micro_batch_above_the_batch_is_said(dialog, qtbot) -> None:
    dialog.n_batch.setValue(256)
    dialog.n_ubatch.setValue(512)
    reason = dialog.checks.labels[dialog.n_ubatch]
    assert reason.isVisible() and "256" in reason.text()


def test_models_folder_that_is_a_file(dialog, qtbot, tmp_path: Path) -> None:
    a_file = tmp_path / "notes.txt"
    a_file.write_text("x")
    dialog.models_dir.setText(str(a_file))
    reason = dialog.checks.labels[dialog.models_dir]
    assert reason.isVisible() and "is a file" in reason.text()
    dialog.models_dir.setText(str(tmp_path))
    assert not reason.isVisible()
    qtbot.keyClick(dialog, Qt.Key.Key_Escape)
