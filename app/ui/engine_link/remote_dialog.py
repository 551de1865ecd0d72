"""'Connect to a server…': URL, model name and API key for an OpenAI-compatible server, and optionally the
remote GPU's memory bandwidth and peak compute, which no engine publishes, and the model's size where the server
does not give it: with them the dashboard's roofline places the server's own prefill and decode against that
machine's roofs. They are saved with the server
(settings' `remote_servers`, by URL) and filled in again when its URL is typed; empty means unknown.

The key goes to the operating system's keyring when the user asks (never into settings.json); without a
working keyring it is used for this session only, and the dialog says so.
"""

from __future__ import annotations

from PySide6.QtCore import QEvent
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
from app.core.remote.roof_entry import RemoteServerRoofs, RoofEntryError, parse_roofs, server_key
from app.ui.toolkit import theme


class RemoteDialog(QDialog):
    def __init__(self, parent: QWidget | None = None, url: str = "",
                 saved: dict[str, RemoteServerRoofs] | None = None):
        super().__init__(parent)
        self._saved = dict(saved or {})
        self.roofs = RemoteServerRoofs()  # what was entered, once accepted
        self.setWindowTitle("Connect to a server")
        self.url = QLineEdit(url)
        self.url.setPlaceholderText("http://127.0.0.1:8080  (llama-server, vLLM, TGI, Ollama, …)")
        self.model = QLineEdit()
        self.model.setPlaceholderText("optional: the server's first model")
        self.key = QLineEdit()
        self.key.setEchoMode(QLineEdit.EchoMode.Password)
        self.key.setPlaceholderText("optional")
        self.bandwidth = QLineEdit()
        self.bandwidth.setPlaceholderText("optional: GB/s, e.g. 3350 for an H100 SXM")
        self.compute = QLineEdit()
        self.compute.setPlaceholderText("optional: TFLOP/s, e.g. 989 (its dense BF16)")
        self.params = QLineEdit()
        self.params.setPlaceholderText("optional: billions, e.g. 8.03 (the server does not say)")
        self.weights = QLineEdit()
        self.weights.setPlaceholderText("optional: GB, e.g. 16.1 for 8.03 B in BF16")
        self.url.textChanged.connect(self._fill_saved)
        self._fill_saved(url)
        self.remember = QCheckBox("Remember the key in the system keyring")
        available = secrets.keyring_available()
        self.remember.setEnabled(available)
        self.remember.setChecked(available)
        note = QLabel("Timings for a remote server are measured here, at the client: TTFT includes the network "
                      "and the server's queue. The GPU's bandwidth and compute, and the model's size (only "
                      "llama-server reports it), place the server's own prefill and decode on the roofline; they "
                      "are saved for this server.")
        note.setWordWrap(True)
        if not available:
            note.setText(note.text() + " " + secrets.unavailable_reason())  # a whole sentence on its own
        self.warning = QLabel("")
        self._restyle()
        form = QFormLayout()
        form.addRow("Server URL", self.url)
        form.addRow("Model", self.model)
        form.addRow("API key", self.key)
        form.addRow("", self.remember)
        form.addRow("GPU bandwidth", self.bandwidth)
        form.addRow("Peak compute", self.compute)
        form.addRow("Model parameters", self.params)
        form.addRow("Model weights", self.weights)
        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Ok | QDialogButtonBox.StandardButton.Cancel)
        buttons.accepted.connect(self._accept)
        buttons.rejected.connect(self.reject)
        layout = QVBoxLayout(self)
        layout.addLayout(form)
        layout.addWidget(note)
        layout.addWidget(self.warning)
        layout.addWidget(buttons)

    def _restyle(self) -> None:
        self.warning.setStyleSheet(f"color: {theme.colors().warn};")

    def changeEvent(self, event: QEvent) -> None:
        super().changeEvent(event)
        if event.type() == QEvent.Type.PaletteChange:  # the theme changed while the dialog is open
            self._restyle()

    def values(self) -> tuple[str, str | None, str | None]:
        return self.url.text().strip(), self.key.text() or None, self.model.text().strip() or None

    def _fill_saved(self, url: str) -> None:
        """A saved server's URL typed (or given): its entered roofs come back into the fields."""
        saved = self._saved.get(server_key(url))
        if saved is not None:
            for field, value in ((self.bandwidth, saved.bandwidth_gbs), (self.compute, saved.peak_tflops),
                                 (self.params, saved.params_b), (self.weights, saved.weights_gb)):
                field.setText(f"{value:g}" if value else "")

    def _accept(self) -> None:
        url, key, _ = self.values()
        if "://" not in url:
            self.warning.setText("Enter a URL such as http://127.0.0.1:8080")
            return
        try:  # a bad number keeps the dialog open with everything typed still there
            self.roofs = parse_roofs(self.bandwidth.text(), self.compute.text(), self.params.text(),
                                     self.weights.text())
        except RoofEntryError as exc:
            self.warning.setText(str(exc))
            return
        if key and self.remember.isChecked():
            try:
                secrets.save_api_key(url, key)
            except secrets.SecretStoreUnavailable as exc:
                self.warning.setText(f"The key could not be stored ({exc}); it is used for this session only.")
        self.accept()
