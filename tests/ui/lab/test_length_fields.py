"""The Lab's prompt/answer length fields: a typo is named next to the field and stops the sweep with a line,
not a Python error."""

from __future__ import annotations

from pathlib import Path

import pytest

pytestmark = pytest.mark.gui


def test_lab_lengths_typo_is_named_next_to_the_field(qtbot, tmp_path: Path) -> None:
    from app.ui.lab.page import LabPage

    page = LabPage(model_path=str(tmp_path / "none.gguf"))
    qtbot.addWidget(page)
    page.show()
    page.prompts.clear()
    qtbot.keyClicks(page.prompts, "abc,64")
    shown = page.field_check.message
    assert shown.isVisible() and shown.text().startswith("Prompt lengths:") and "“abc”" in shown.text()
    page.start_sweep()
    assert not page.running
    assert "invalid literal" not in page.status.text() and "“abc”" in page.status.text()
    page.prompts.setText("64, 128")
    assert not shown.isVisible()
