"""The chat in the main window: conversations (open, new, deleted, reloaded) and the input (send, edit and
resend, regenerate, continue, stop), with the buttons kept in step with the session and the engine.

A reply goes on while another conversation is shown (the engine writes one reply at a time, so Send waits
for it there); the dashboard shows it only while its own conversation is shown, and keeps count meanwhile.
"""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import Qt, QTimer
from PySide6.QtWidgets import QMessageBox, QWidget

from app.core.chat.store import Message
from app.core.metrics.phase import PhaseMetrics
from app.ui.chat.conversation_list import elided
from app.ui.chat.reply_ending import can_continue
from app.ui.engine_link import engine_qt as E
from app.ui.toolkit.safe_text import set_plain_tooltip
from app.ui.window.banner import NO_MODEL
from app.ui.window.base import WindowBase
from app.ui.window.last_used import LastUsed
from app.ui.window.unsent_drafts import ChatDrafts

NO_MODEL_LOADED = "no model is loaded"
BUSY_TITLE_CHARS = 40  # of the other chat's title in the note above the input (the whole of it on hover)


def ask_to_stop_for_reload(parent: QWidget) -> bool:
    """Settings that need a reload while a reply is being written: True = stop it and reload now, False =
    reload once the reply has ended."""
    box = QMessageBox(QMessageBox.Icon.Question, "Reload the model?",
                      "These settings take effect when the model is reloaded, which stops the reply being "
                      "written.", parent=parent)
    now = box.addButton("Stop the reply and reload", QMessageBox.ButtonRole.AcceptRole)
    later = box.addButton("Reload after the reply", QMessageBox.ButtonRole.RejectRole)
    box.setDefaultButton(later)
    box.exec()
    return box.clickedButton() is now


class ChatFlow(WindowBase):

    def _wire_chat_flow(self) -> None:
        """Connections and state of the chat flow (called once by the window, before a chat is opened)."""
        self.drafts = ChatDrafts(self.input, str(self.store.path), self)
        self._reload_after_reply = False
        self.last_used = LastUsed(self)  # the Library's "Last used" on each load and reply
        self.session.reply_started.connect(self._reply_started)
        self.session.message_removed.connect(self._messages_removed)
        self.session.tokens_timed.connect(self._tokens_timed)
        self.session.busy_changed.connect(self._reply_busy_changed)

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
        self.drafts.forget(conversation_id)
        if self.session.streaming_conversation_id == conversation_id:
            self.session.stop()  # nowhere left to write it
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
        self.cancel_edit()
        self.drafts.switch_to(conversation_id)
        messages = self.store.messages(conversation_id)
        self.message_view.set_messages(messages)
        if conv is not None:
            blocker = self.sampling_panel.system_prompt.blockSignals(True)
            self.sampling_panel.system_prompt.setPlainText(conv.system_prompt)
            self.sampling_panel.system_prompt.blockSignals(blocker)
        self.dashboard.set_history(self._history_of(messages))
        replies = [m for m in messages if m.metrics]
        if replies:
            self.dashboard.show_reply_lines(replies[-1].metrics or {}, replies[-1].finish_reason or "")
        if self.session.streaming_conversation_id == conversation_id:
            self.dashboard.resume_reply()  # its reply is still being written: live again from its next token
        self._update_buttons()

    @staticmethod
    def _history_of(messages: list[Message], leave_out: int | None = None) -> list[PhaseMetrics]:
        """The conversation's reply metrics, one per reply that exists (replaced replies are gone)."""
        return [PhaseMetrics.from_dict(m.metrics) for m in messages if m.metrics and m.id != leave_out]

    def _shown(self, conversation_id: int | None) -> bool:
        conv = self.session.conversation
        return conv is not None and conversation_id == conv.id

    def _reload_list(self) -> None:
        conv = self.session.conversation
        self.conversations.reload(keep=conv.id if conv else None)

    def _message_added(self, message: Message) -> None:
        self.message_view.add_message(message)
        self._update_buttons()

    def _reply_started(self, message_id: int) -> None:
        self.dashboard.start_reply()  # a new reply or more of one (Continue): its clock starts now
        msg = self.store.message(message_id)
        if msg is not None:  # a continued reply's header says "writing…" again, not how it ended before
            self.message_view.update_message(msg)

    def _tokens_timed(self, times: list[float]) -> None:
        self.dashboard.on_tokens(times)  # drawn only while its chat is shown; counted always (resume_reply)

    def _messages_removed(self, message_id: int) -> None:
        """Regenerate or Edit replaced replies: they leave the view and the dashboard's series."""
        self.message_view.remove_from(message_id)
        conv = self.session.conversation
        if conv is not None:
            self.dashboard.replace_history(self._history_of(self.store.messages(conv.id)))

    def _message_finished(self, message: Message) -> None:
        self.message_view.update_message(message)
        self.dashboard.end_reply()
        if self._shown(message.conversation_id):
            # One point per reply that exists: a continued reply replaces its own earlier point.
            earlier = self._history_of(self.store.messages(message.conversation_id), leave_out=message.id)
            if message.metrics:
                self.dashboard.replace_history(earlier, redraw=False)
                self.dashboard.add_metrics(PhaseMetrics.from_dict(message.metrics))
                self.dashboard.show_reply_lines(message.metrics, message.finish_reason or "")
                self.dashboard.slow_line.show_for(message.metrics)  # why this reply, on screen, was slow
            else:
                self.dashboard.set_history(earlier)
        elif self.session.conversation is not None:  # it ended in the background: the shown chat's numbers
            self.dashboard.set_history(self._history_of(self.store.messages(self.session.conversation.id)))
        self._reload_list()
        self._update_buttons()

    def _reply_busy_changed(self, busy: bool) -> None:
        if not busy and self._reload_after_reply:
            self._reload_after_reply = False
            self.hint_label.setText("")
            if self.session.model_path:
                self.load_model(Path(self.session.model_path))

    def _reload_for_settings(self) -> None:
        """Engine settings changed: reload the model, asking first when that would stop a reply."""
        if not self.session.model_path:
            return
        if self.session.busy and not ask_to_stop_for_reload(self):
            self._reload_after_reply = True
            self.hint_label.setText("The model reloads when this reply ends.")  # until it does
            return
        self.load_model(Path(self.session.model_path))  # stops a reply as "model reloaded"

    # ------------------------------------------------------------------ input
    def submit(self) -> None:
        text = self.input.toPlainText()
        if not text.strip():
            return
        if self.session.busy:
            if not self._shown(self.session.streaming_conversation_id):
                self._hint("Not sent: a reply in another chat is still being written (Stop ends it).")
            return
        self._apply_sampling()
        if not self._ready_to_generate():
            return
        if self._editing is not None:
            if self.session.edit_and_resend(self._editing, text):
                self.cancel_edit()  # the draft set aside for the edit comes back
        elif self.session.send(text):
            self.drafts.sent()

    def _apply_sampling(self) -> None:
        self.session.sampling = self.sampling_panel.sampling()
        self.session.prompt_lookup = self.sampling_panel.prompt_lookup.isChecked()
        for key, value in self.sampling_overrides.items():
            setattr(self.session.sampling, key, value)

    def regenerate(self) -> bool:
        self._apply_sampling()
        return self._back_to_input(self._ready_to_generate() and self.session.regenerate())

    def continue_reply(self) -> bool:
        self._apply_sampling()
        return self._back_to_input(self._ready_to_generate() and self.session.continue_reply())

    def _back_to_input(self, started: bool) -> bool:
        """A reply started by a button: the reply disables the button, whose focus went on to the next Tab stop
        (the dashboard); the message box gets it instead, where the next message is typed."""
        if started:
            self.input.setFocus(Qt.FocusReason.OtherFocusReason)
        return started

    def _why_not_ready(self) -> str:
        """Why nothing can be sent now ("" when it can): the hint says it, and Send's tooltip."""
        if self.engine.connecting:
            return "still connecting to the server"
        if self.engine.loaded_info is None:
            state = self.engine.state
            if state in (E.LOADING, E.STARTING) or self._default_job is not None:  # (the first start assembles it)
                return "the model is still loading"
            return "the engine stopped (Restart engine, above)" if state == E.DEAD else NO_MODEL_LOADED
        return ""

    def _ready_to_generate(self) -> bool:
        why = self._why_not_ready()
        if not why:
            return True
        self._hint(f"Not sent: {why}.")
        if why == NO_MODEL_LOADED:  # after Eject, or a failed load: say how to get one (the text stays typed)
            self.banner.show_message(self._no_model_note(), while_model=NO_MODEL)
        return False

    def _no_model_note(self) -> str:
        reload = self.model_manager.reload_action
        if reload.isEnabled() and self.session.model_path:
            return (f"No model is loaded: choose one in the toolbar, or press Reload (Ctrl+R) to load "
                    f"{Path(self.session.model_path).name} again.")
        return "No model is loaded: choose one in the toolbar."

    def _hint(self, text: str) -> None:
        self.hint_label.setText(text)
        set_plain_tooltip(self.hint_label, text)  # the whole of it, where the row cuts it
        QTimer.singleShot(4000, self, lambda: self._clear_hint(text))

    def _clear_hint(self, text: str) -> None:
        if self.hint_label.text() == text:  # not a later hint, nor "The model reloads when this reply ends."
            self.hint_label.setText("")
            self.hint_label.setToolTip("")

    def escape(self) -> None:
        if self._editing is not None:
            self.cancel_edit()  # the draft typed before Edit comes back
        elif self.session.busy and self._shown(self.session.streaming_conversation_id):
            self.session.stop()

    def begin_edit(self, message_id: int) -> None:
        if self.session.busy:
            return
        msg = self.store.message(message_id)
        if msg is None:
            return
        self._editing = message_id
        self.drafts.begin_edit(msg.content)
        self.edit_label.show()
        self.send_button.setText("Resend")
        self.input.setFocus()

    def cancel_edit(self) -> None:
        self._editing = None
        self.drafts.end_edit()
        self.edit_label.hide()
        self.send_button.setText("Send")

    def _show_busy_note(self, elsewhere: bool) -> None:
        """Above the input of a chat whose Send waits for another chat's reply: which chat, and what Stop does."""
        conv = self.store.conversation(self.session.streaming_conversation_id or -1) if elsewhere else None
        if conv is None:
            self.busy_note.hide()
            return
        self.busy_note.setText(f"A reply is being written in “{elided(conv.title, BUSY_TITLE_CHARS)}”: Send waits "
                               "for it; Stop ends it.")
        set_plain_tooltip(self.busy_note, f"The engine writes one reply at a time. “{conv.title}” is still being "
                                          "answered: open it from the list to follow the reply.")
        self.busy_note.show()

    def _update_buttons(self) -> None:
        if self._closed:  # engine news after closing: the store is closed and nothing is shown any more
            return
        busy = self.session.busy
        ready = self.engine.loaded_info is not None and self.engine.alive
        msgs = self.store.messages(self.session.conversation.id) if self.session.conversation else []
        last = msgs[-1] if msgs else None
        elsewhere = busy and not self._shown(self.session.streaming_conversation_id)
        why_not = "" if busy else self._why_not_ready()
        self.send_button.setEnabled(not busy and not why_not)
        if elsewhere:
            send_tip = "A reply in another chat is still being written: Send waits for it (Stop ends it)."
        elif why_not:  # Enter in the message box says it too (the hint, and the banner without a model)
            send_tip = self._no_model_note() if why_not == NO_MODEL_LOADED else f"Not now: {why_not}."
        else:
            send_tip = ""
        self.send_button.setToolTip(send_tip)
        self._show_busy_note(elsewhere)
        self.stop_shortcut.setEnabled(busy and not elsewhere)  # Esc from anywhere: the reply on screen
        self.stop_button.setEnabled(busy)
        self.stop_button.setToolTip("Stop the reply being written in another chat" if elsewhere
                                    else "Stop the reply (Esc)")
        self.regen_button.setEnabled(not busy and ready and last is not None)
        self.continue_button.setVisible(can_continue(last))
        self.continue_button.setEnabled(not busy and ready)
