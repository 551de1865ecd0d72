"""Main window: conversations on the left, the chat in the middle, the performance dashboard docked right.

Other pages (Models, Lab) join through `add_page(title, widget)`: the centre is a tab widget whose tab bar
appears once there is more than one page. Engine trouble shows as a banner with a Restart button, never
as a stack of dialogs; the window keeps working meanwhile.
"""

from __future__ import annotations

import re
import threading
from pathlib import Path

from PySide6.QtCore import QByteArray, Qt, QTimer, Signal
from PySide6.QtGui import QAction, QCloseEvent, QGuiApplication, QKeySequence
from PySide6.QtWidgets import (
    QComboBox,
    QFileDialog,
    QFrame,
    QHBoxLayout,
    QLabel,
    QMainWindow,
    QProgressBar,
    QPushButton,
    QScrollArea,
    QSizePolicy,
    QSplitter,
    QTabWidget,
    QToolBar,
    QVBoxLayout,
    QWidget,
)

from app.core import settings as settings_mod
from app.core.chat_store import ChatStore, Message
from app.core.metrics import PhaseMetrics, fmt_bytes
from app.core.store_recovery import OpenedStore, open_chat_store
from app.engine import protocol as P
from app.ui import engine_qt as E
from app.ui import model_selector, onboarding, theme
from app.ui.model_selector import CONNECT_REMOTE, OPEN_FILE
from app.ui.bandwidth_feed import BandwidthFeed
from app.ui.banner import Banner
from app.ui.chat_session import ChatSession
from app.ui.conversation_list import ConversationPanel
from app.ui.dashboard import DashboardDock
from app.ui.thinking_box import connect_thinking
from app.ui.engine_qt import EngineQt
from app.ui.lazy_page import LazyPage
from app.ui.message_view import InputBox, MessageView
from app.ui.safe_text import make_plain, set_plain_tooltip
from app.ui.model_preset import ModelPresetControl
from app.ui.sampling_panel import SamplingPanel
from app.ui.shutdown import shut_down
from app.ui.startup_guard import OpeningGuard

_QUANT_RE = re.compile(r"(?i)(IQ\d_[A-Z]+|Q\d_K_[SML]|Q\d_K|Q\d_\d|F16|BF16|F32|MXFP4)")


def quant_of(loaded: P.Loaded) -> str:
    for text in (Path(loaded.model_path).name, loaded.model_desc):
        m = _QUANT_RE.search(text)
        if m:
            return m.group(1).upper()
    return loaded.model_desc or "?"


class MainWindow(QMainWindow):
    def __init__(self, store: ChatStore | None = None, settings_result: settings_mod.LoadResult | None = None,
                 engine: EngineQt | None = None):
        super().__init__()
        self.setWindowTitle("Roofline")
        result = settings_result or settings_mod.load_settings()
        self.settings = result.settings
        opened = OpenedStore(store) if store is not None else open_chat_store()
        self.store = opened.store
        self._owns_store = store is None
        self.store.recover_streaming()
        self._opening = OpeningGuard(self.store.path, self)
        self._plain_conversations: set[int] = set()  # shown as plain text (one crashed the last start)
        self.engine = engine or EngineQt(self)
        self.session = ChatSession(self.store, self.engine, self)
        self._editing: int | None = None
        self._closed = False
        # Extra Sampling fields for scripts and tests (e.g. {"ignore_eos": True} for fixed-length replies).
        self.sampling_overrides: dict[str, object] = {}
        # Measure memory bandwidth once per machine after a load (2 s of all cores; tests switch it off).
        self.measure_bandwidth_on_load = True

        # ---- central pages
        self.pages = QTabWidget()
        self.pages.setDocumentMode(True)
        self.pages.setTabBarAutoHide(True)
        self.setCentralWidget(self.pages)

        self.conversations = ConversationPanel(self.store)
        self.sampling_panel = SamplingPanel()
        self.sampling_panel.set_values(self.settings.sampling)
        left = QSplitter(Qt.Orientation.Vertical)
        left.addWidget(self.conversations)
        sampling_scroll = QScrollArea()
        sampling_scroll.setWidgetResizable(True)
        sampling_scroll.setFrameShape(QFrame.Shape.NoFrame)
        sampling_scroll.setWidget(self.sampling_panel)
        sampling_scroll.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        sampling_scroll.setMinimumWidth(self.sampling_panel.minimumSizeHint().width()
                                        + sampling_scroll.verticalScrollBar().sizeHint().width())
        left.addWidget(sampling_scroll)
        left.setStretchFactor(0, 1)
        left.setStretchFactor(1, 1)

        chat = QWidget()
        cl = QVBoxLayout(chat)
        cl.setContentsMargins(0, 6, 6, 6)
        self.banner = Banner()
        self.banner.restart_requested.connect(self.restart_engine)
        cl.addWidget(self.banner)
        self.message_view = MessageView()
        self.message_view.edit_requested.connect(self.begin_edit)
        cl.addWidget(self.message_view, 1)
        self.edit_label = QLabel("Editing a message: Enter sends it again and replaces the replies after it; "
                                 "Esc cancels.")
        self.edit_label.setWordWrap(True)
        self.edit_label.hide()
        cl.addWidget(self.edit_label)
        self.input = InputBox()
        self.input.submitted.connect(self.submit)
        self.input.escaped.connect(self.escape)
        cl.addWidget(self.input)
        buttons = QHBoxLayout()
        self.send_button = QPushButton("Send")
        self.send_button.setDefault(True)
        self.send_button.clicked.connect(self.submit)
        self.stop_button = QPushButton("Stop")
        self.stop_button.setToolTip("Stop the reply (Esc)")
        self.stop_button.clicked.connect(self.session.stop)
        self.regen_button = QPushButton("Regenerate")
        self.regen_button.setToolTip("Replace the last reply with a new one")
        self.regen_button.clicked.connect(self.regenerate)
        self.continue_button = QPushButton("Continue")
        self.continue_button.setToolTip("Continue the interrupted reply")
        self.continue_button.clicked.connect(self.continue_reply)
        for b in (self.send_button, self.stop_button, self.regen_button, self.continue_button):
            buttons.addWidget(b)
        buttons.addStretch(1)
        self.hint_label = QLabel("")
        buttons.addWidget(self.hint_label)
        cl.addLayout(buttons)

        split = QSplitter(Qt.Orientation.Horizontal)
        split.addWidget(left)
        split.addWidget(chat)
        split.setStretchFactor(0, 0)
        split.setStretchFactor(1, 1)
        split.setSizes([260, 700])
        self.chat_page = split
        self.add_page("Chat", split)

        # ---- Models and Lab pages, built when first opened
        self.models_page = LazyPage(self._make_models_page)
        self.add_page("Models", self.models_page)
        self.lab_page = LazyPage(self._make_lab_page)
        self.add_page("Lab", self.lab_page)

        # ---- dashboard dock
        self.dock = DashboardDock(self.engine, self)
        self.dashboard = self.dock.dashboard
        self.dashboard.n_ubatch = self.settings.n_ubatch
        self.bandwidth = BandwidthFeed(self.dashboard, self)
        self.addDockWidget(Qt.DockWidgetArea.RightDockWidgetArea, self.dock)

        # ---- toolbar: model selector
        tb = QToolBar("Model")
        tb.setObjectName("model_toolbar")
        tb.setMovable(False)
        tb.addWidget(QLabel(" Model "))
        self.model_combo = QComboBox()
        self.model_combo.setMinimumContentsLength(28)
        self.model_combo.setSizeAdjustPolicy(QComboBox.SizeAdjustPolicy.AdjustToMinimumContentsLengthWithIcon)
        self.model_combo.activated.connect(self._model_chosen)
        tb.addWidget(self.model_combo)
        self.model_info = QLabel("")
        self.model_info.setContentsMargins(10, 0, 10, 0)
        tb.addWidget(self.model_info)
        spacer = QWidget()
        spacer.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Preferred)
        tb.addWidget(spacer)
        self.dashboard_action = self.dock.toggleViewAction()
        self.dashboard_action.setText("Dashboard")
        tb.addAction(self.dashboard_action)
        quit_action = QAction("Quit", self)
        quit_action.setShortcut(QKeySequence("Ctrl+Q"))  # Ctrl+Q, as in every desktop app
        quit_action.setShortcutContext(Qt.ShortcutContext.ApplicationShortcut)
        quit_action.triggered.connect(self.close)
        self.addAction(quit_action)
        settings_action = QAction("Settings…", self)
        settings_action.setShortcut(QKeySequence.StandardKey.Preferences)
        settings_action.triggered.connect(self.open_settings)
        tb.addAction(settings_action)
        self.model_preset = ModelPresetControl(self)  # the chosen model's preset: applied on load, edited here
        tb.addAction("Preset…", self.model_preset.open_dialog).setToolTip("Settings for this model file")
        self.addToolBar(tb)
        new_action = QAction("New chat", self)
        new_action.setShortcut(QKeySequence.StandardKey.New)
        new_action.triggered.connect(self.new_chat)
        self.addAction(new_action)

        # ---- status bar
        self.state_label = QLabel("engine: stopped")
        self.progress = QProgressBar()
        self.progress.setRange(0, 1000)
        self.progress.setMaximumWidth(180)
        self.progress.setTextVisible(False)
        self.progress.hide()
        self.mem_label = QLabel("")
        self.statusBar().addWidget(self.state_label)
        self.statusBar().addWidget(self.progress)
        self.statusBar().addPermanentWidget(self.mem_label)

        # ---- wiring
        self.conversations.open_requested.connect(self.open_conversation)
        self.conversations.new_requested.connect(self.new_chat)
        self.conversations.deleted.connect(self._conversation_deleted)
        self.session.conversation_changed.connect(self._load_conversation)
        self.session.message_added.connect(self._message_added)
        self.session.message_removed.connect(self.message_view.remove_from)
        self.session.stream_text.connect(self.message_view.append_text)
        connect_thinking(self.session, self.message_view)  # a reasoning model's thinking, live
        self.session.message_finished.connect(self._message_finished)
        self.session.busy_changed.connect(lambda _b: self._update_buttons())
        self.session.tokens_timed.connect(self.dashboard.on_tokens)
        self.session.conversations_changed.connect(self._reload_list)
        self.sampling_panel.system_prompt_changed.connect(self.session.set_system_prompt)
        self.engine.state_changed.connect(self._engine_state)
        self.engine.progress.connect(self._progress)
        self.engine.loaded.connect(self._loaded)
        self.engine.error.connect(self._engine_error)
        self.engine.stats.connect(self._stats)
        QGuiApplication.styleHints().colorSchemeChanged.connect(lambda _s: self.restyle())
        app = QGuiApplication.instance()
        if isinstance(app, QGuiApplication):
            theme.apply_system_scheme(app)

        make_plain(self.model_info, self.state_label, self.hint_label)
        self._restore_window()
        self._populate_models()
        notes = [w for w in (opened.warning, result.warning) if w]
        notes += self._open_first_conversation()
        self._update_buttons()
        if notes:
            self.banner.show_message(" ".join(notes))
        self.bandwidth.request()

    def _open_first_conversation(self) -> list[str]:
        """Reopen the newest chat, unless the last run died while opening one (then start empty and say
        why). Returns what the banner should say."""
        crashed = self._opening.left_over()
        self._opening.clear()
        convs = self.store.list_conversations()
        if crashed is not None:
            self._plain_conversations.add(crashed)
            title = next((c.title for c in convs if c.id == crashed), None)
            which = f"the chat “{title}”" if title else "a chat"
            note = (f"The last start stopped while opening {which}, so it was not reopened. It shows as plain "
                    f"text when you open it from the list.")
            return [note]
        if not convs:
            return []
        try:
            self.open_conversation(convs[0].id)
        except Exception as exc:  # noqa: BLE001 (stored content must never keep the window from starting)
            self._opening.clear()
            self.message_view.clear()
            self.session.conversation = None
            return [f"The last chat could not be opened ({type(exc).__name__}: {exc}); pick another from the list."]
        return []

    # ------------------------------------------------------------------ pages
    def add_page(self, title: str, widget: QWidget) -> int:
        """Add a page to the central tab widget (Models, Lab...). Returns its index."""
        return self.pages.addTab(widget, title)

    def _make_models_page(self) -> QWidget:
        from app.ui.models_page import ModelsPage

        page = ModelsPage()
        page.model_chosen.connect(self._model_from_library)
        return page

    def _model_from_library(self, path: str) -> None:
        self.pages.setCurrentWidget(self.chat_page)
        if path != self.session.model_path or self.engine.loaded_info is None:
            self.load_model(Path(path))

    def _make_lab_page(self) -> QWidget:
        from app.ui.lab_page import LabPage

        page = LabPage(model_path=self.session.model_path)
        tuned = self._tuned(self.session.model_path)
        if tuned:
            page.load_overrides = dict(tuned)
        return page

    def _tuned(self, model: str | Path | None) -> dict[str, int] | None:
        """The auto-tuned threads/ubatch for this machine and model (`roofline tune`), when threads are auto."""
        if model is None or self.settings.threads is not None:
            return None
        from app.core.autotune import tuned_config

        try:
            return tuned_config(model)
        except (OSError, ValueError):
            return None

    # ------------------------------------------------------------------ models
    def _populate_models(self) -> None:
        model_selector.populate(self.model_combo, self.settings)

    def _model_chosen(self, index: int) -> None:
        data = self.model_combo.itemData(index)
        if data == CONNECT_REMOTE:
            from app.ui.remote_dialog import RemoteDialog

            dialog = RemoteDialog(self, url=self.engine.remote[0] if self.engine.remote else "")
            if dialog.exec() == RemoteDialog.DialogCode.Accepted:
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
        from app.core.load_plan import plan_load  # the CLI's way too: settings, preset, tune result

        return P.LoadConfig(model_path=str(model), **plan_load(model, self.settings).load_kwargs())

    def load_model(self, model: Path) -> None:
        if self.session.busy:
            self.session.stop()
        self.session.model_path = str(model)
        self._select_model_in_combo(str(model))
        self.model_info.setText("loading…")
        self.model_preset.apply(model)
        self.engine.load(self.load_config(model))

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

        def work() -> None:
            from app.core.default_model import default_model_path

            try:
                path: Path | None = default_model_path()
                err = ""
            except Exception as exc:  # noqa: BLE001 (any failure is reported in the banner)
                path, err = None, str(exc)
            try:
                self._default_ready.emit(str(path) if path else "", err)
            except RuntimeError:  # window already gone
                pass

        threading.Thread(target=work, name="default-model", daemon=True).start()

    _default_ready = Signal(str, str)

    def _on_default_ready(self, path: str, err: str) -> None:
        if path:
            self.load_model(Path(path))
        else:
            self.banner.show_message(f"The default model could not be prepared: {err}")

    # ------------------------------------------------------------------ engine events
    def _engine_state(self, state: str) -> None:
        pid = self.engine.pid
        text = f"engine: {state}" + (f" (pid {pid})" if pid and state != E.DEAD else "")
        self.state_label.setText(text)
        self.progress.setVisible(state == E.LOADING)
        if state == E.LOADING:
            self.progress.setValue(0)
        self._update_buttons()

    def _progress(self, stage: str, fraction: float) -> None:
        self.progress.show()
        self.progress.setValue(int(1000 * max(0.0, min(1.0, fraction))))
        self.state_label.setText(f"engine: loading — {stage} {100 * fraction:.0f} %")

    def _loaded(self, loaded: P.Loaded) -> None:
        self.progress.hide()
        self.session.model_path = loaded.model_path
        self._select_model_in_combo(loaded.model_path)
        remote = loaded.chat_template_source == "server"
        if not remote:  # a server URL is not a file to reopen or to list in the library
            self.settings.last_model = loaded.model_path
            self._mark_used(loaded.model_path)
            note = onboarding.demo_model_note(loaded.model_path, self.store)
            if note and not self.banner.isVisibleTo(self):  # never hide a warning that is already shown
                self.banner.show_message(note, info=True)
        if self.lab_page.widget is not None:
            self.lab_page.widget.set_model(loaded.model_path)  # type: ignore[attr-defined]
        if remote:
            self.model_info.setText("remote server · its own chat template · timings measured client-side")
        else:
            self.model_info.setText(
                f"{quant_of(loaded)} · ctx {loaded.n_ctx} · template {loaded.chat_template_name} "
                f"({loaded.chat_template_source}) · load {loaded.load_ms:.0f} ms")
        set_plain_tooltip(self.model_info,
            f"{loaded.model_desc}\n{loaded.n_params / 1e6:.0f} M parameters, {fmt_bytes(loaded.model_size)}\n"
            f"architecture {loaded.architecture}, trained context {loaded.n_ctx_train}\n"
            f"chat template: {loaded.chat_template_name} (from {loaded.chat_template_source})\n"
            f"KV cache {loaded.type_k}/{loaded.type_v}, {fmt_bytes(loaded.kv_bytes_allocated)}; "
            f"threads {loaded.n_threads}/{loaded.n_threads_batch}; GPU layers {loaded.n_gpu_layers}\n"
            f"streaming: {self.engine.pacing.describe()}")
        if self.banner.restart_button.isVisible() or "engine" in self.banner.label.text().lower():
            self.banner.hide()
        if not self.bandwidth.known and self.measure_bandwidth_on_load:
            self.bandwidth.request(measure=True)
        self._update_buttons()

    @staticmethod
    def _mark_used(path: str) -> None:
        from app.core.library import mark_used

        try:
            mark_used(path)
        except OSError:
            pass  # "last used" is a nicety; never let it disturb a load

    def _engine_error(self, error: P.Error) -> None:
        if error.fatal:
            self.model_info.setText("engine stopped")
            first = error.message.strip().splitlines()[0] if error.message.strip() else "The engine stopped."
            self.banner.show_message(f"{first} Your text so far is saved; restart the engine to go on "
                                     f"(Continue or Regenerate).", restart=True,
                                     details=error.message)  # the engine's last log lines
        elif error.kind == "load_failed":
            self.model_info.setText("load failed")
            self.banner.show_message(f"Could not load the model: {error.message}")
        else:
            self.banner.show_message(f"{error.kind.replace('_', ' ')}: {error.message}")
        self.progress.hide()
        self._update_buttons()

    def _stats(self, stats: P.Stats) -> None:
        self.mem_label.setText(f"engine RSS {fmt_bytes(stats.rss_bytes)} · KV {stats.kv_cells_used}/"
                               f"{stats.kv_cells_allocated} cells")

    def restart_engine(self) -> None:
        self.banner.hide()
        self.engine.restart()
        if self.engine.loaded_info is None and self.session.model_path and self.engine.state != E.LOADING:
            self.load_model(Path(self.session.model_path))

    # ------------------------------------------------------------------ conversations
    def new_chat(self) -> None:
        if self.session.busy:
            return
        conv = self.session.new_conversation()  # a system prompt belongs to its chat, not to the next one
        self.conversations.search.clear()
        self.conversations.reload(keep=conv.id)
        self.input.setFocus()

    def open_conversation(self, conversation_id: int) -> None:
        self.cancel_edit()
        self._opening.opening(conversation_id)
        self.message_view.plain_only = conversation_id in self._plain_conversations
        self.session.open(conversation_id)
        self.conversations.select(conversation_id)

    def _conversation_deleted(self, conversation_id: int) -> None:
        if self.session.conversation and self.session.conversation.id == conversation_id:
            self.session.conversation = None
            self.message_view.clear()
            self.dashboard.set_history([])
            convs = self.store.list_conversations()
            if convs:
                self.open_conversation(convs[0].id)
        self._update_buttons()

    def _load_conversation(self, conversation_id: int) -> None:
        conv = self.session.conversation
        messages = self.store.messages(conversation_id)
        self.message_view.set_messages(messages)
        if conv is not None:
            blocker = self.sampling_panel.system_prompt.blockSignals(True)
            self.sampling_panel.system_prompt.setPlainText(conv.system_prompt)
            self.sampling_panel.system_prompt.blockSignals(blocker)
        self.dashboard.set_history([PhaseMetrics.from_dict(m.metrics) for m in messages if m.metrics])
        self._update_buttons()

    def _reload_list(self) -> None:
        conv = self.session.conversation
        self.conversations.reload(keep=conv.id if conv else None)

    def _message_added(self, message: Message) -> None:
        self.message_view.add_message(message)
        if message.role == "assistant" and message.state == "streaming":
            self.dashboard.start_reply()
        self._update_buttons()

    def _message_finished(self, message: Message) -> None:
        self.message_view.update_message(message)
        if message.metrics:
            self.dashboard.add_metrics(PhaseMetrics.from_dict(message.metrics))
        self._reload_list()
        self._update_buttons()

    # ------------------------------------------------------------------ input
    def submit(self) -> None:
        text = self.input.toPlainText()
        if not text.strip() or self.session.busy:
            return
        self._apply_sampling()
        if not self._ready_to_generate():
            return
        if self._editing is not None:
            ok = self.session.edit_and_resend(self._editing, text)
            if ok:
                self.cancel_edit()
        else:
            ok = self.session.send(text)
        if ok:
            self.input.clear()

    def _apply_sampling(self) -> None:
        self.session.sampling = self.sampling_panel.sampling()
        self.session.prompt_lookup = self.sampling_panel.prompt_lookup.isChecked()
        for key, value in self.sampling_overrides.items():
            setattr(self.session.sampling, key, value)

    def regenerate(self) -> bool:
        self._apply_sampling()
        return self._ready_to_generate() and self.session.regenerate()

    def continue_reply(self) -> bool:
        self._apply_sampling()
        return self._ready_to_generate() and self.session.continue_reply()

    def _ready_to_generate(self) -> bool:
        if self.engine.loaded_info is None:
            state = self.engine.state
            why = "the model is still loading" if state in (E.LOADING, E.STARTING) else "no model is loaded"
            self.hint_label.setText(f"Not sent: {why}.")
            QTimer.singleShot(4000, self, lambda: self.hint_label.setText(""))
            return False
        return True

    def escape(self) -> None:
        if self.session.busy:
            self.session.stop()
        elif self._editing is not None:
            self.cancel_edit()
            self.input.clear()

    def begin_edit(self, message_id: int) -> None:
        if self.session.busy:
            return
        msg = self.store.message(message_id)
        if msg is None:
            return
        self._editing = message_id
        self.input.setPlainText(msg.content)
        self.edit_label.show()
        self.send_button.setText("Resend")
        self.input.setFocus()

    def cancel_edit(self) -> None:
        self._editing = None
        self.edit_label.hide()
        self.send_button.setText("Send")

    def _update_buttons(self) -> None:
        if self._closed:  # engine news after closing: the store is closed and nothing is shown any more
            return
        busy = self.session.busy
        ready = self.engine.loaded_info is not None and self.engine.alive
        msgs = self.store.messages(self.session.conversation.id) if self.session.conversation else []
        last = msgs[-1] if msgs else None
        self.send_button.setEnabled(not busy)
        self.stop_button.setEnabled(busy)
        self.regen_button.setEnabled(not busy and ready and last is not None)
        self.continue_button.setVisible(last is not None and last.role == "assistant"
                                        and last.state == "interrupted")
        self.continue_button.setEnabled(not busy and ready)

    # ------------------------------------------------------------------ settings, theme, lifetime
    def open_settings(self) -> None:
        from app.ui.settings_dialog import SettingsDialog

        # The dialog edits the defaults starting from what the sidebar shows, so OK does not undo the sidebar
        self.settings.sampling = self.model_preset.global_sampling()
        dlg = SettingsDialog(self.settings, self, model_path=self.session.model_path)
        if dlg.exec():
            old = self.load_config(Path(self.session.model_path)) if self.session.model_path else None
            self.settings = dlg.result_settings()
            self.model_preset.settings_changed()
            self.dashboard.n_ubatch = self.settings.n_ubatch
            self.save_settings()
            self._populate_models()
            self._select_model_in_combo(self.session.model_path)
            if old is not None and self.session.model_path and old != self.load_config(Path(self.session.model_path)):
                self.load_model(Path(self.session.model_path))  # engine settings changed: reload

    def restyle(self) -> None:
        app = QGuiApplication.instance()
        if isinstance(app, QGuiApplication):
            theme.apply_system_scheme(app)
        self.banner.restyle()
        self.message_view.restyle()
        self.dashboard.restyle()

    def _restore_window(self) -> None:
        w = self.settings.window
        if w.geometry:
            self.restoreGeometry(QByteArray.fromBase64(w.geometry.encode()))
        else:
            self.resize(1400, 860)
        if w.state:
            self.restoreState(QByteArray.fromBase64(w.state.encode()))
        self.dock.setVisible(w.dashboard_visible)
        self._default_ready.connect(self._on_default_ready)

    def save_settings(self) -> None:
        self.settings.window.geometry = bytes(self.saveGeometry().toBase64().data()).decode()
        self.settings.window.state = bytes(self.saveState().toBase64().data()).decode()
        self.settings.window.dashboard_visible = self.dock.isVisible()
        self.settings.sampling = self.model_preset.global_sampling()
        try:
            settings_mod.save_settings(self.settings)
        except OSError as exc:
            self.banner.show_message(f"Settings could not be saved: {exc}")

    def closeEvent(self, event: QCloseEvent) -> None:
        if not self._closed:
            self._closed = True
            shut_down(self)
        super().closeEvent(event)
