"""The quantize dialog after Cancel (or a failure) is ready for another try: the button and the fields are
enabled again, and a second run writes the model."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from app.core.config import paths
from synth_gguf import write_synthetic_gguf

pytestmark = pytest.mark.gui


@pytest.fixture
def dialog(qtbot: Any) -> Any:
    from app.ui.models_page import QuantizeDialog

    src = write_synthetic_gguf(paths.models_dir() / "tiny-F32.gguf", n_layers=2)
    dlg = QuantizeDialog(src)
    qtbot.addWidget(dlg)
    dlg.show()
    return dlg


def _editable(dlg: Any) -> bool:
    return dlg.start_btn.isEnabled() and dlg.type_box.isEnabled() and dlg.name_edit.isEnabled()


def test_after_cancel_the_dialog_can_quantize_again(dialog: Any, qtbot: Any) -> None:
    dialog.type_box.setCurrentText("Q8_0")
    dialog.start_btn.click()
    assert not _editable(dialog)
    dialog.cancel_btn.click()  # at once: before or while the quantizer runs
    qtbot.waitUntil(lambda: "cancel" in dialog.status.text() and dialog.status.text() != "cancelling…",
                    timeout=60000)
    qtbot.waitUntil(lambda: _editable(dialog), timeout=10000)
    assert dialog.progress.value() == 0 and dialog.cancel_btn.text() == "Cancel" and dialog.isVisible()
    assert not dialog.output_path().exists()
    with qtbot.waitSignal(dialog.finished_ok, timeout=60000) as sig:
        dialog.start_btn.click()  # the second try goes through
    assert Path(sig.args[0]).exists() and dialog.cancel_btn.text() == "Close"


def test_after_a_failure_the_fields_can_be_changed(dialog: Any, qtbot: Any) -> None:
    dialog.source.write_bytes(b"GGUF broken")  # the source went bad: the quantizer refuses it
    dialog.start_btn.click()
    qtbot.waitUntil(lambda: _editable(dialog), timeout=30000)
    assert "not a usable GGUF model" in dialog.status.text()
    dialog.cancel_btn.click()  # Cancel now closes the dialog
    assert not dialog.isVisible()
