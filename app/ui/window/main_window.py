"""Main window: conversations on the left, the chat in the middle, the performance dashboard docked right.

Other pages (Models, Lab) join through `add_page(title, widget)`: the centre is a tab widget whose tab bar
appears once there is more than one page. Engine trouble shows as a banner with a Restart button, never
as a stack of dialogs; the window keeps working meanwhile.

This module builds the window and owns its lifetime (settings, theme, closing); its other jobs are the
mixins it is made of: the chat (chat_flow.py), the engine's events (engine_events.py) and choosing and
loading models (model_loading.py).
"""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import QByteArray, Qt
from PySide6.QtGui import QCloseEvent, QGuiApplication
from PySide6.QtWidgets import (
    QComboBox,
    QFrame,
    QLabel,
    QProgressBar,
    QScrollArea,
    QSizePolicy,
    QSplitter,
    QTabWidget,
    QToolBar,
    QVBoxLayout,
    QWidget,
)

from app.core.chat import trash as chat_trash
from app.core.chat.store import ChatStore
from app.core.chat.store_recovery import OpenedStore, open_chat_store
from app.core.config import settings as settings_mod
from app.ui.chat.context_meter import ContextMeter
from app.ui.chat.conversation_list import ConversationPanel
from app.ui.chat.export_dialog import ExportControl
from app.ui.chat.input_box import InputBox
from app.ui.chat.message_view import MessageView
from app.ui.chat.prefill_progress import PrefillProgressView
from app.ui.chat.sampling_panel import SamplingPanel
from app.ui.chat.session import ChatSession
from app.ui.chat.thinking_box import connect_thinking
from app.ui.chat.version_nav import VersionsControl
from app.ui.dashboard import DashboardDock
from app.ui.dashboard.bandwidth_feed import BandwidthFeed
from app.ui.engine_link.engine_qt import EngineQt
from app.ui.model_bar.draft_model_action import DraftModelControl
from app.ui.model_bar.eject_reload import ModelManager
from app.ui.model_bar.fitted_combo import FittedCombo
from app.ui.model_bar.preset import ModelPresetControl
from app.ui.serve.switch import ServeSwitch
from app.ui.toolkit.background import BackgroundJob
from app.ui.toolkit.lazy_page import LazyPage
from app.ui.toolkit.safe_text import make_plain
from app.ui.toolkit.whole_parts_label import WholePartsLabel
from app.ui.window.banner import Banner
from app.ui.window.chat_buttons import build_button_row, busy_note
from app.ui.window.chat_flow import ChatFlow
from app.ui.window.engine_events import EngineEvents
from app.ui.window.menus import WindowMenus
from app.ui.window.model_loading import ModelLoading
from app.ui.window.restyle import restyle_window
from app.ui.window.room_for_chat import RoomForChat
from app.ui.window.shutdown import shut_down
from app.ui.window.startup_guard import OpeningGuard
from app.ui.window.status_line import StatusLine
from app.ui.window.status_speed import StatusSpeed
from app.ui.window.too_long_flow import TooLongFlow

SIDEBAR_MIN_WIDTH = 200  # with the chat and the dashboard's narrowest dock, the window fits 800 px


class MainWindow(ChatFlow, EngineEvents, ModelLoading):
    """Builds the window's widgets and wiring; its jobs are the parts it inherits from (see the module text)."""

    def __init__(self, store: ChatStore | None = None, settings_result: settings_mod.LoadResult | None = None,
                 engine: EngineQt | None = None):
        super().__init__()
        self.setWindowTitle("Roofline")
        notes = self._open_settings_and_store(store, settings_result)
        self._init_session(engine)
        self._build_pages()
        self._build_chat_page()
        self._build_lazy_pages()
        self._build_dashboard()
        self._build_status_bar()  # before the toolbar: its Serve switch writes into the status line
        self._build_toolbar()
        self._wire_chat()
        self._wire_engine()
        self._follow_system_theme()
        self._wire_chat_flow()  # drafts, replies in the background, reloads asked for by Settings
        self._start(notes)

    # ------------------------------------------------------------------ building the window
    def _open_settings_and_store(self, store: ChatStore | None,
                                 settings_result: settings_mod.LoadResult | None) -> list[str]:
        """Load the settings and open the chat store (tidied after a crash). Returns their warnings, if any."""
        result = settings_result or settings_mod.load_settings()
        self.settings = result.settings
        opened = OpenedStore(store) if store is not None else open_chat_store()
        self.store = opened.store
        self._owns_store = store is None
        self.store.recover_streaming()
        chat_trash.empty(self.store, older_than_days=chat_trash.KEEP_DAYS)
        self._opening = OpeningGuard(self.store.path, self)
        self._plain_conversations: set[int] = set()  # shown as plain text (one crashed the last start)
        return [w for w in (opened.warning, result.warning) if w]

    def _init_session(self, engine: EngineQt | None) -> None:
        """The engine, the chat session over it and the window's own state."""
        self.engine = engine or EngineQt(self)
        self.session = ChatSession(self.store, self.engine, self)
        # the settings' policy until a chosen model's preset says otherwise (app.ui.model_bar.preset)
        self.session.context_overflow = self.settings.context_overflow
        self._editing: int | None = None
        self._closed = False
        self._default_job: BackgroundJob | None = None  # the default model being prepared, if it is
        # Extra Sampling fields for scripts and tests (e.g. {"ignore_eos": True} for fixed-length replies).
        self.sampling_overrides: dict[str, object] = {}
        # Measure memory bandwidth once per machine after a load (2 s of all cores; tests switch it off).
        self.measure_bandwidth_on_load = True

    def _build_pages(self) -> None:
        """The central tab widget; its tab bar shows once there is more than one page."""
        self.pages = QTabWidget()
        self.pages.setDocumentMode(True)
        self.pages.setTabBarAutoHide(True)
        self.setCentralWidget(self.pages)

    def _build_chat_page(self) -> None:
        """The Chat page: the sidebar on the left, the chat column beside it."""
        split = QSplitter(Qt.Orientation.Horizontal)
        split.addWidget(self._build_sidebar())
        split.addWidget(self._build_chat_column())
        split.setStretchFactor(0, 0)
        split.setStretchFactor(1, 1)
        split.setSizes([260, 700])
        self.chat_page = split
        self.add_page("Chat", split)

    def _build_sidebar(self) -> QSplitter:
        """The conversation list above the sampling panel."""
        self.conversations = ConversationPanel(self.store)
        self.sampling_panel = SamplingPanel()
        self.sampling_panel.set_values(self.settings.sampling)
        left = QSplitter(Qt.Orientation.Vertical)
        left.addWidget(self.conversations)
        sampling_scroll = QScrollArea()
        sampling_scroll.setWidgetResizable(True)
        sampling_scroll.setFrameShape(QFrame.Shape.NoFrame)
        sampling_scroll.setWidget(self.sampling_panel)
        # Narrower than its fields in a small window: it scrolls sideways rather than widen the window.
        sampling_scroll.setMinimumWidth(SIDEBAR_MIN_WIDTH)
        # Its fields are the Tab stops (Tab scrolls to each); the area was one more, showing no focus.
        sampling_scroll.setFocusPolicy(Qt.FocusPolicy.NoFocus)
        left.addWidget(sampling_scroll)
        left.setStretchFactor(0, 1)
        left.setStretchFactor(1, 1)
        return left

    def _build_chat_column(self) -> QWidget:
        """The banner, the messages, the edit note, the input and the row of buttons."""
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
        self.busy_note = busy_note()  # a reply in another chat holds Send: which one, and what Stop does
        cl.addWidget(self.busy_note)
        self.input = InputBox()
        self.input.submitted.connect(self.submit)
        self.input.escaped.connect(self.escape)
        cl.addWidget(self.input)
        # the context meter (app/ui/chat/context_meter.py) on its own line under the input: beside the buttons a
        # narrow chat column (800 x 600) squeezed it to nothing
        self.context_label = QLabel("")
        self.context_label.setWordWrap(True)
        cl.addWidget(self.context_label)
        cl.addLayout(build_button_row(self))  # Send, Stop, Regenerate, Continue, the hint; Esc stops from anywhere
        return chat

    def _build_lazy_pages(self) -> None:
        """The Models and Lab pages, built when first opened."""
        self.models_page = LazyPage(self._make_models_page)
        self.add_page("Models", self.models_page)
        self.lab_page = LazyPage(self._make_lab_page)
        self.add_page("Lab", self.lab_page)

    def _build_dashboard(self) -> None:
        """The performance dashboard, docked right, and its memory-bandwidth feed."""
        self.dock = DashboardDock(self.engine, self)
        self.dashboard = self.dock.dashboard
        self.dashboard.slow_line.follows_engine = False  # about the chat on screen (app/ui/window/chat_flow.py)
        self.dashboard.n_ubatch = self.settings.n_ubatch
        self.dashboard.server_link.roofs_of = self.server_roofs  # a remote server's entered GPU roofs
        self.bandwidth = BandwidthFeed(self.dashboard, self)
        self.addDockWidget(Qt.DockWidgetArea.RightDockWidgetArea, self.dock)

    def _build_toolbar(self) -> None:
        """The model toolbar: the model selector, Eject and Reload, the model line, then the actions."""
        tb = QToolBar("Model")
        tb.setObjectName("model_toolbar")
        tb.setMovable(False)
        tb.addWidget(QLabel(" Model "))
        self.model_combo = FittedCombo()  # its face drops whole parts of the summary, never cuts a number
        self.model_combo.setMinimumContentsLength(22)
        self.model_combo.setSizeAdjustPolicy(QComboBox.SizeAdjustPolicy.AdjustToMinimumContentsLengthWithIcon)
        self.model_combo.activated.connect(self._model_chosen)
        tb.addWidget(self.model_combo)
        self.model_manager = ModelManager(self, tb)  # Eject, Reload
        self.model_info = WholePartsLabel("")  # drops whole parts where it does not fit, never cuts a number
        self.model_info.setContentsMargins(10, 0, 10, 0)
        tb.addWidget(self.model_info)
        spacer = QWidget()
        spacer.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Preferred)
        tb.addWidget(spacer)
        self._add_toolbar_actions(tb)
        self.addToolBar(tb)
        self.serve_switch = ServeSwitch(self, tb)  # `roofline serve` on the loaded model, from the toolbar
        self.menus.add_model_menu(tb)  # the same actions in a menu, and each button a Tab stop
        self.status_speed = StatusSpeed(self.session, self.dock, self.status_line)  # while the dashboard is hidden
        # a narrowed window: the chat keeps its room first, the toolbar its buttons
        self.room_for_chat = RoomForChat(self, self.dock, self.chat_page)

    def _add_toolbar_actions(self, tb: QToolBar) -> None:
        """Dashboard, Settings, Preset… and Draft model… at the toolbar's right end."""
        self.dashboard_action = self.dock.toggleViewAction()
        self.dashboard_action.setText("Dashboard")
        tb.addAction(self.dashboard_action)
        self.menus = WindowMenus(self)
        tb.addAction(self.menus.settings)
        self.model_preset = ModelPresetControl(self)  # the chosen model's preset: applied on load, edited here
        self.preset_action = tb.addAction("Preset…", self.model_preset.open_dialog)
        self.preset_action.setToolTip("Settings for this model file")
        self.draft_control = DraftModelControl(self)  # speculative decoding with a small model of the same family
        self.draft_action = tb.addAction("Draft model…", self.draft_control.open_dialog)
        self.draft_action.setToolTip("Speculative decoding: a small model with the same vocabulary drafts tokens")

    def _build_status_bar(self) -> None:
        """The engine's state and the load progress; at the right, one line for the server, the reply's speed
        and the memory (app.ui.window.status_line)."""
        self.state_label = QLabel("engine: stopped")
        self.progress = QProgressBar()
        self.progress.setRange(0, 1000)
        self.progress.setMaximumWidth(180)
        self.progress.setTextVisible(False)
        self.progress.hide()
        self.status_line = StatusLine()
        self.statusBar().addWidget(self.state_label)
        self.statusBar().addWidget(self.progress)
        self.statusBar().addPermanentWidget(self.status_line)

    # ------------------------------------------------------------------ wiring
    def _wire_chat(self) -> None:
        """The conversation list and the session to the window's chat (and the parts that follow them)."""
        self.conversations.open_requested.connect(self.open_conversation)
        self.conversations.new_requested.connect(self.new_chat)
        self.conversations.deleted.connect(self._conversation_deleted)
        self.conversations.restored.connect(self.open_conversation)  # Undo shows the chat again
        self.session.conversation_changed.connect(self._load_conversation)
        self.session.message_added.connect(self._message_added)
        self.session.stream_text.connect(self.message_view.append_text)
        connect_thinking(self.session, self.message_view)  # a reasoning model's thinking, live
        self.session.message_finished.connect(self._message_finished)
        self.session.busy_changed.connect(lambda _b: self._update_buttons())
        self.session.conversations_changed.connect(self._reload_list)
        self.sampling_panel.system_prompt_changed.connect(self.session.set_system_prompt)
        self.versions = VersionsControl(self)  # ‹1/3› on regenerated and edited turns
        self.exports = ExportControl(self)  # the chat list's Export…; a File menu can call export_current()

    def _wire_engine(self) -> None:
        """The engine's events (and the dashboard's live KV switch) to the window."""
        self.engine.state_changed.connect(self._engine_state)
        self.engine.progress.connect(self._progress)
        self.engine.loaded.connect(self._loaded)
        self.engine.error.connect(self._engine_error)
        self.engine.stats.connect(self._stats)
        self.dashboard.live_kv_changed.connect(self._live_kv)
        self.too_long_flow = TooLongFlow(self)  # a message over the context: the ways out
        self.prefill_view = PrefillProgressView(self)  # a long prompt's prefill as it goes
        self.context_meter = ContextMeter(self, self.context_label)  # the chat + draft against the context

    def _follow_system_theme(self) -> None:
        """Apply the system's light or dark scheme (or the theme chosen in View ▸ Theme) now and whenever it
        changes: the widgets built before the chosen theme was read (the menus read it) take its colours too."""
        QGuiApplication.styleHints().colorSchemeChanged.connect(lambda _s: self.restyle())
        self.restyle()

    def _start(self, notes: list[str]) -> None:
        """Restore the window, list the models, reopen the newest chat and say what went wrong, if anything."""
        make_plain(self.model_info, self.state_label, self.hint_label)
        self._restore_window()
        self._populate_models()
        notes = notes + self._open_first_conversation()
        self._update_buttons()
        if notes:
            self.banner.show_message(" ".join(notes))
        self.bandwidth.request()

    # ------------------------------------------------------------------ pages
    def add_page(self, title: str, widget: QWidget) -> int:
        """Add a page to the central tab widget (Models, Lab...). Returns its index."""
        return self.pages.addTab(widget, title)

    # ------------------------------------------------------------------ settings, theme, lifetime
    def open_settings(self) -> None:
        from app.ui.settings.dialog import SettingsDialog

        # The dialog edits the defaults starting from what the sidebar shows, so OK does not undo the sidebar
        self.settings.sampling = self.model_preset.global_sampling()
        from app.core.chat.model_usage import model_usage

        model = self.session.model_path
        dlg = SettingsDialog(self.settings, self, model_path=model,
                             usage=model_usage(self.store, model) if model else None)
        if dlg.exec():
            old = self.load_config(Path(self.session.model_path)) if self.session.model_path else None
            self.settings = dlg.result_settings()
            self.model_preset.settings_changed()
            self.dashboard.n_ubatch = self.settings.n_ubatch
            self.save_settings()
            self._populate_models()
            self._select_model_in_combo(self.session.model_path)
            if old is not None and self.session.model_path and old != self.load_config(Path(self.session.model_path)):
                self._reload_for_settings()  # engine settings changed: reload (asks during a reply)

    def restyle(self) -> None:
        restyle_window(self)

    def _restore_window(self) -> None:
        w = self.settings.window
        if w.geometry:
            self.restoreGeometry(QByteArray.fromBase64(w.geometry.encode()))
        else:
            self.resize(1400, 860)
        if w.state:
            self.restoreState(QByteArray.fromBase64(w.state.encode()))
        self.dock.setVisible(w.dashboard_visible)

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
            if self._default_job is not None:  # a closed window starts no engine when the default model is ready
                self._default_job.cancel()
            shut_down(self)
        super().closeEvent(event)
