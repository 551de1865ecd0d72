"""The first start's note that the bundled model is a demo base model, drawn as a note, not a warning."""

from __future__ import annotations

from pathlib import Path

import pytest

pytestmark = pytest.mark.gui


def test_first_start_says_the_bundled_model_is_a_demo_base_model(window, monkeypatch) -> None:
    from app.core.models import default_model

    loaded = window.engine.loaded_info
    monkeypatch.setattr(default_model, "default_model_path", lambda ensure=True: Path(loaded.model_path))
    window.engine.loaded.emit(loaded)
    assert window.banner.isVisible()
    assert "demo base model" in window.banner.text() and "Discover" in window.banner.text()
    note_style = window.banner.styleSheet()
    window.banner.show_message("The engine stopped.")  # a warning after the note: warning colours again
    assert window.banner.styleSheet() != note_style and not window.banner.info
    window.banner.show_message("a note", info=True)
    assert window.banner.styleSheet() == note_style  # the note is drawn as a note, not as a warning
