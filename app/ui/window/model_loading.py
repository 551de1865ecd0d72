"""Choosing and loading models in the main window: the toolbar's model list, the Models and Lab pages' hooks,
the settings turned into a load (`load_config`), remote servers, and the default model at start."""

from __future__ import annotations

from pathlib import Path

from PySide6.QtWidgets import QFileDialog, QWidget

from app.core.remote.roof_entry import RemoteServerRoofs, server_key
from app.engine import protocol as P
from app.ui.chat.reply_ending import MODEL_RELOADED
from app.ui.model_bar import selector as model_selector
from app.ui.model_bar.selector import CONNECT_REMOTE, OPEN_FILE
from app.ui.toolkit.background import run_in_background
from app.ui.window.base import WindowBase


class ModelLoading(WindowBase):

    # ------------------------------------------------------------------ pages
    def _make_models_page(self) -> QWidget:
        from app.core.chat.model_usage import model_usage
        from app.ui.models_page import ModelsPage

        page = ModelsPage()
        page.usage_of = lambda path: model_usage(self.store, path)  # the window owns the chat store
        page.model_chosen.connect(self._model_from_library)
        page.library_changed.connect(self._refresh_model_selector)  # a new download or quantized file at once
        return page

    def _model_from_library(self, path: str) -> None:
        self.pages.setCurrentWidget(self.chat_page)
        if path != self.session.model_path or self.engine.loaded_info is None:
            self.load_model(Path(path))

    def _make_lab_page(self) -> QWidget:
        from app.ui.lab.page import LabPage

        page = LabPage(model_path=self.session.model_path, engine=self.engine)  # its sweeps: an engine EngineQt owns
        tuned = self._tuned(self.session.model_path)
        if tuned:
            page.load_overrides = dict(tuned)
        return page

    def _tuned(self, model: str | Path | None) -> dict[str, int] | None:
        """The auto-tuned threads/ubatch for this machine and model (`roofline tune`), when threads are auto."""
        if model is None or self.settings.threads is not None:
            return None
        from app.core.predict.autotune import tuned_config

        try:
            return tuned_config(model)
        except (OSError, ValueError):
            return None

    # ------------------------------------------------------------------ models
    def _populate_models(self) -> None:
        model_selector.populate(self.model_combo, self.settings)

    def _refresh_model_selector(self) -> None:
        """The models folder changed: list it again, the model in use still chosen."""
        self._populate_models()
        self._select_model_in_combo(self.session.model_path)

    def _model_chosen(self, index: int) -> None:
        data = self.model_combo.itemData(index)
        if data == CONNECT_REMOTE:
            from app.ui.engine_link.remote_dialog import RemoteDialog

            dialog = RemoteDialog(self, url=self.engine.remote[0] if self.engine.remote else "",
                                  saved=self.settings.remote_servers)
            if dialog.exec() == RemoteDialog.DialogCode.Accepted:
                self.remember_server_roofs(dialog.values()[0], dialog.roofs)
                self.connect_remote(*dialog.values())
            else:
                self._select_model_in_combo(self.session.model_path)
            return
        if data == OPEN_FILE:
            path, _ = QFileDialog.getOpenFileName(self, "Open a GGUF model", str(self.settings.resolved_models_dir()),
                                                  "GGUF models (*.gguf)")
            if not path:
                self._select_model_in_combo(self.session.model_path)
                return
            data = path
        loaded = self.engine.loaded_info.model_path if self.engine.loaded_info else None
        if data and model_selector.needs_load(data, self.session.model_path, loaded):
            self.load_model(Path(data))

    def _select_model_in_combo(self, path: str | None) -> None:
        if path is None:
            return
        i = self.model_combo.findData(path)
        if i < 0:
            remote = self.engine.remote is not None and self.engine.loaded_info is not None \
                and self.engine.loaded_info.model_path == path
            name = self.engine.loaded_info.model_desc if remote and self.engine.loaded_info else Path(path).name
            self.model_combo.insertItem(0, name, path)
            i = 0
        self.model_combo.setCurrentIndex(i)

    def load_config(self, model: Path) -> P.LoadConfig:
        from app.core.chat.saved_kv import default_dir
        from app.core.predict.load_plan import plan_load  # the CLI's way too: settings, preset, tune result

        return P.LoadConfig(model_path=str(model), **plan_load(model, self.settings).load_kwargs(),
                            **self.draft_control.load_kwargs(model), kv_store_dir=str(default_dir()),
                            kv_store_budget_mib=self.settings.saved_kv_budget_mib)

    def load_model(self, model: Path) -> None:
        if self.session.busy:
            self.session.stop(MODEL_RELOADED)
        self.session.model_path = str(model)
        self._select_model_in_combo(str(model))
        self.model_info.setText("loading…")
        self.model_preset.apply(model)
        self.engine.load(self.load_config(model))

    def server_roofs(self, url: str) -> RemoteServerRoofs | None:
        """The GPU roofs entered for the server at `url` (None: none entered)."""
        return self.settings.remote_servers.get(server_key(url))

    def remember_server_roofs(self, url: str, roofs: RemoteServerRoofs) -> None:
        """The GPU roofs entered for a server, saved with it in the settings (both empty: forgotten)."""
        servers = dict(self.settings.remote_servers)
        if roofs.empty:
            if servers.pop(server_key(url), None) is None:
                return
        else:
            servers[server_key(url)] = roofs
        self.settings.remote_servers = servers
        self.save_settings()

    def connect_remote(self, url: str, api_key: str | None = None, model: str | None = None) -> None:
        """Chat with an OpenAI-compatible server through the same window (client-side timings)."""
        if self.session.busy:
            self.session.stop()
        self.model_info.setText(f"connecting to {url}…")
        self.engine.connect_remote(url, api_key, model)

    def load_default_model(self) -> None:
        """Load the last model, else the embedded default (assembled off the GUI thread if needed)."""
        last = self.settings.last_model
        if last and Path(last).exists():
            self.load_model(Path(last))
            return
        self.state_label.setText("engine: preparing the default model…")
        self._default_job = run_in_background(self, _prepare_default_model, self._default_model_ready,
                                              self._default_model_failed, name="default-model")

    def _default_model_ready(self, model: Path) -> None:
        """The default model is on disk now (a first start assembled it): list it again so the selector
        reads its header (size, quantization, verdict and advice), then load it."""
        self._default_job = None  # done: Send no longer waits for it (app.ui.window.chat_flow)
        self._refresh_model_selector()
        self.load_model(model)

    def _default_model_failed(self, exc: BaseException) -> None:
        self._default_job = None
        self.banner.show_message(f"The default model could not be prepared: {exc}")
        self._update_buttons()  # Send says why it cannot send now


def _prepare_default_model() -> Path:
    """The default model's path, assembled first if needed (that may take a while: never on the GUI thread)."""
    from app.core.models.default_model import default_model_path

    return default_model_path()
