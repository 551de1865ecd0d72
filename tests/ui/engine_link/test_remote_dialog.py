"""The Connect to a server dialog's keyring line says its message once."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.gui


def test_keyring_message_is_not_nested_in_itself(qtbot, monkeypatch) -> None:
    from PySide6.QtWidgets import QLabel

    from app.core.config import secrets
    from app.ui.engine_link.remote_dialog import RemoteDialog

    monkeypatch.setattr(secrets, "keyring_available", lambda: False)
    dialog = RemoteDialog()
    qtbot.addWidget(dialog)
    texts = [label.text() for label in dialog.findChildren(QLabel) if "keyring" in label.text()]
    assert texts and all(t.count("keyring is available") == 1 and "(No system keyring" not in t for t in texts)
