"""The chat in the main window: conversations (open, new, deleted, reloaded) and the input (send, edit and
resend, regenerate, continue, stop), with the buttons kept in step with the session and the engine."""

from __future__ import annotations

from PySide6.QtCore import QTimer

from app.core.chat_store import Message
from app.core.metrics import PhaseMetrics
from app.ui import engine_qt as E
from app.ui.window.base import WindowBase


class ChatFlow(WindowBase):

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
