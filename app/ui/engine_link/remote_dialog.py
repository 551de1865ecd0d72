"""'Connect to a server…': URL, model name and API key for an OpenAI-compatible server.

The key goes to the operating system's keyring when the user asks (never into settings.json); without a
working keyring it is used for this session only, and the dialog says so.
"""

from __future__ import annotations

from PySide6.QtWidgets import (
    QCheckBox,
    QDialog,
    QDialogButtonBox,
    QFormLayout,
    QLabel,
    QLineEdit,
    QVBoxLayout,
    QWidget,
)

from app.core.config import secrets


class RemoteDialog(QDialog):
    def __init__(self, parent: QWidget | None = None, url: str = ""):
        super().__init__(parent)
        self.setWindowTitle("Connect to a server")
        self.url = QLineEdit(url)
        self.url.setPlaceholderText("http://127.0.0.1:8080  (llama-server, vLLM, TGI, Ollama, …)")
        self.model = QLineEdit()
        self.model.setPlaceholderText("optional: the server's first model")
        self.key = QLineEdit()
        self.key.setEchoMode(QLineEdit.EchoMode.Password)
        self.key.setPlaceholderText("optional")
        self.remember = QCheckBox("Remember the key in the system keyring")
        available = secrets.keyring_available()
        self.remember.setEnabled(available)
        self.remember.setChecked(available)
        note = QLabel("Timings for a remote server are measured here, at the client: TTFT includes the network "
                      "and the server's queue.")
        note.setWordWrap(True)
        if not available:
            note.setText(note.text() + " " + secrets.unavailable_reason())  # a whole sentence on its own
        self.warning = QLabel("")
        self.warning.setStyleSheet("color: #c0392b;")
        form = QFormLayout()
        form.addRow("Server URL", self.url)
        form.addRow("Model", self.model)
        form.addRow("API key", self.key)
        form.addRow("", self.remember)
        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Ok | QDialogButtonBox.StandardButton.Cancel)
        buttons.accepted.connect(self._accept)
        buttons.rejected.connect(self.reject)
        layout = QVBoxLayout(self)
        layout.addLayout(form)
        layout.addWidget(note)
        layout.addWidget(self.warning)
        layout.addWidget(buttons)

    def values(self) -> tuple[str, str | None, str | None]:
        return self.url.text().strip(), self.key.text() or None, self.model.text().strip() or None

    def _accept(self) -> None:
        url, key, _ = self.values()
        if "://" not in url:
            self.warning.setText("Enter a URL such as http://127.0.0.1:8080")
            return
        if key and self.remember.isChecked():
            try:
                secrets.save_api_key(url, key)
            except secrets.SecretStoreUnavailable as exc:
                self.warning.setText(f"The key could not be stored ({exc}); it is used for this session only.")
        self.accept()
