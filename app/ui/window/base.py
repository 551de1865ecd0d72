"""What the main window's parts share: the widgets and state that `MainWindow.__init__` builds, declared once
so that each part (chat flow, engine events, model loading) can be read, and type-checked, on its own.

The parts are mixins of one window rather than separate objects because every one of them works on the same
few widgets (the banner, the model line, the buttons); declared here, those widgets have one owner.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from PySide6.QtGui import QShortcut
from PySide6.QtWidgets import QComboBox, QLabel, QMainWindow, QProgressBar, QPushButton, QSplitter, QTabWidget

from app.core.chat.store import ChatStore
from app.core.config import settings as settings_mod
from app.ui.chat.conversation_list import ConversationPanel
from app.ui.chat.input_box import InputBox
from app.ui.chat.message_view import MessageView
from app.ui.chat.sampling_panel import SamplingPanel
from app.ui.chat.session import ChatSession
from app.ui.dashboard import Dashboard, DashboardDock
from app.ui.dashboard.bandwidth_feed import BandwidthFeed
from app.ui.engine_link.engine_qt import EngineQt
from app.ui.model_bar.draft_model_action import DraftModelControl
from app.ui.model_bar.eject_reload import ModelManager
from app.ui.model_bar.preset import ModelPresetControl
from app.ui.toolkit.background import BackgroundJob
from app.ui.toolkit.lazy_page import LazyPage
from app.ui.toolkit.whole_parts_label import WholePartsLabel
from app.ui.window.banner import Banner
from app.ui.window.startup_guard import OpeningGuard
from app.ui.window.status_line import StatusLine

if TYPE_CHECKING:
    from app.ui.dashboard.live_numbers import LiveKV
    from app.ui.window.last_used import LastUsed
    from app.ui.window.unsent_drafts import ChatDrafts


class WindowBase(QMainWindow):
    settings: settings_mod.Settings
    store: ChatStore
    engine: EngineQt
    session: ChatSession
    # central pages
    pages: QTabWidget
    chat_page: QSplitter  # [sidebar, chat]
    models_page: LazyPage
    lab_page: LazyPage
    # the chat page
    conversations: ConversationPanel
    sampling_panel: SamplingPanel
    model_preset: ModelPresetControl
    draft_control: DraftModelControl
    banner: Banner
    message_view: MessageView
    edit_label: QLabel
    busy_note: QLabel  # above the input while a reply in another chat holds Send
    input: InputBox
    send_button: QPushButton
    stop_button: QPushButton
    regen_button: QPushButton
    continue_button: QPushButton
    hint_label: QLabel
    stop_shortcut: QShortcut  # Esc from anywhere in the window, while the chat on screen has a reply written
    # dashboard, toolbar, status bar
    dock: DashboardDock
    dashboard: Dashboard
    bandwidth: BandwidthFeed
    model_combo: QComboBox
    model_manager: ModelManager  # Eject and Reload
    model_info: WholePartsLabel
    state_label: QLabel
    progress: QProgressBar
    status_line: StatusLine  # the server, the reply's speed, the memory
    # state
    sampling_overrides: dict[str, object]
    measure_bandwidth_on_load: bool
    _opening: OpeningGuard
    _plain_conversations: set[int]
    _editing: int | None
    _closed: bool
    _default_job: BackgroundJob | None
    drafts: ChatDrafts
    last_used: LastUsed
    _reload_after_reply: bool

    if TYPE_CHECKING:  # what one part calls in another (defined in chat_flow.py and model_loading.py)
        def _update_buttons(self) -> None: ...
        def load_model(self, model: Path) -> None: ...
        def _select_model_in_combo(self, path: str | None) -> None: ...
        def _reload_for_settings(self) -> None: ...
        def _wire_chat_flow(self) -> None: ...
        def _live_kv(self, kv: LiveKV) -> None: ...
        def save_settings(self) -> None: ...
