"""Chat logic between the store, the engine and the widgets: send, stop, regenerate, edit, continue.

Owns no widget. The reply being streamed is saved through a `StreamWriter` (every 250 ms) so that a crash
loses at most that much text; Done stores the phase metrics; a dead engine leaves the reply `interrupted`.
Opening another conversation does not stop a reply: it goes on being written into its own conversation.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from PySide6.QtCore import QObject, QTimer, Signal

from app.core.chat import versions as chat_versions
from app.core.chat.store import ChatStore, Conversation, Message, StreamWriter
from app.engine import protocol as P
from app.ui.chat.reply_ending import ENGINE_DIED, can_continue
from app.ui.engine_link.engine_qt import EngineQt


class ChatSession(QObject):
    conversation_changed = Signal(int)  # the view must reload everything
    message_added = Signal(object)  # Message
    message_removed = Signal(int)  # message id (and everything after it)
    stream_text = Signal(int, str)  # message id, new text
    stream_reasoning = Signal(int, str)  # message id, new thinking text (reasoning models)
    message_finished = Signal(object)  # Message, reloaded from the store
    busy_changed = Signal(bool)
    reply_started = Signal(int)  # message id: a new reply, or more of an earlier one (Continue)
    tokens_timed = Signal(list)  # engine timestamps of newly arrived tokens (ITL histogram)
    conversations_changed = Signal()  # titles/order changed: the list model reloads

    def __init__(self, store: ChatStore, engine: EngineQt, parent: QObject | None = None):
        super().__init__(parent)
        self.store = store
        self.engine = engine
        self.sampling = P.Sampling()
        self.prompt_lookup = False  # speculative prompt-lookup decoding (a chat setting)
        # The model's preset or the settings (app.ui.model_bar.preset sets them when a model is chosen):
        self.context_overflow = "stop"
        self.default_system_prompt = ""  # for chats started from now on
        self.model_path: str | None = None
        self.conversation: Conversation | None = None
        self._request: str | None = None
        self._reply_id: int | None = None
        self._reply_conversation: int | None = None  # where the streaming reply belongs
        self._stop_reason: str | None = None  # why the window stopped the reply, when it was not the user
        self._writer: StreamWriter | None = None
        self._reasoning = ""  # the streaming reply's thinking so far
        self._reasoning_saved = 0  # how much of it the store has
        self._flush_timer = QTimer(self)
        self._flush_timer.setInterval(250)  # also flush when tokens pause, not only when more arrive
        self._flush_timer.timeout.connect(self._flush)
        self._closed = False
        engine.tokens.connect(self._on_tokens)
        engine.reasoning.connect(self._on_reasoning)
        engine.done.connect(self._on_done)
        engine.error.connect(self._on_error)

    def close(self) -> None:
        """The window is closing and the store closes next: stop writing, ignore the engine from now on."""
        from app.ui.window.shutdown import disconnect_quietly

        self._closed = True
        self._flush_timer.stop()
        for signal, slot in ((self.engine.tokens, self._on_tokens),
                             (self.engine.reasoning, self._on_reasoning), (self.engine.done, self._on_done),
                             (self.engine.error, self._on_error)):
            disconnect_quietly(signal, slot)

    # ------------------------------------------------------------------ state
    @property
    def busy(self) -> bool:
        return self._request is not None

    @property
    def streaming_message_id(self) -> int | None:
        return self._reply_id

    @property
    def streaming_conversation_id(self) -> int | None:
        return self._reply_conversation if self.busy else None

    def open(self, conversation_id: int) -> None:
        """Show another conversation. A reply being written goes on in the background, into its own
        conversation; what it has so far is saved first, so reopening its conversation shows all of it."""
        if self.busy:
            self._flush_all()
        self.conversation = self.store.conversation(conversation_id)
        self.conversation_changed.emit(conversation_id)

    def new_conversation(self, system_prompt: str = "") -> Conversation:
        conv = self.store.create_conversation("New chat", system_prompt or self.default_system_prompt)
        self.open(conv.id)
        self.conversations_changed.emit()
        return conv

    def set_system_prompt(self, text: str) -> None:
        if self.conversation is not None and text != self.conversation.system_prompt:
            self.store.set_system_prompt(self.conversation.id, text)
            self.conversation.system_prompt = text

    # ------------------------------------------------------------------ actions
    def send(self, text: str) -> bool:
        """Add a user message and ask for a reply. False if busy or no model is loaded."""
        text = text.strip()
        if not text or self.busy or not self._can_generate():
            return False
        if self.conversation is None:
            self.new_conversation()
        assert self.conversation is not None
        if not self.store.messages(self.conversation.id) and self.conversation.title == "New chat":
            title = " ".join(text.split())[:48]
            self.store.rename_conversation(self.conversation.id, title)
            self.conversation.title = title
        msg = self.store.add_message(self.conversation.id, "user", text)
        self.message_added.emit(msg)
        self.conversations_changed.emit()
        return self._start_reply()

    def stop(self, reason: str | None = None) -> None:
        """Stop the reply. `reason` is a finish reason of app.ui.chat.reply_ending when the window, not the user,
        stops it (e.g. the model is reloaded)."""
        if self._request:
            self._stop_reason = reason
            self.engine.cancel(self._request)

    def regenerate(self) -> bool:
        """Replace the last assistant reply with a new one."""
        if self.busy or self.conversation is None or not self._can_generate():
            return False
        msgs = self.store.messages(self.conversation.id)
        if not msgs:
            return False
        if msgs[-1].role == "assistant":
            self._truncate_from(msgs[-1].id)
        return self._start_reply()

    def edit_and_resend(self, message_id: int, text: str) -> bool:
        """Replace a user message's text, drop everything after it, and ask again."""
        text = text.strip()
        if self.busy or self.conversation is None or not text or not self._can_generate():
            return False
        msg = self.store.message(message_id)
        if msg is None or msg.role != "user" or msg.conversation_id != self.conversation.id:
            return False
        self._truncate_from(message_id)
        new = self.store.add_message(self.conversation.id, "user", text)
        self.message_added.emit(new)
        return self._start_reply()

    def continue_reply(self) -> bool:
        """Continue the last reply when it was cut short or stopped at Max tokens: the text so far is sent
        back and the new text appended."""
        if self.busy or self.conversation is None or not self._can_generate():
            return False
        msgs = self.store.messages(self.conversation.id)
        if not msgs or not can_continue(msgs[-1]):
            return False
        return self._start_reply(continue_message=msgs[-1])

    def retry(self, context_overflow: str | None = None) -> bool:
        """Ask again for the last reply when it failed (the engine refused the request), the failed reply
        deleted rather than kept as a version; `context_overflow` for this request only."""
        reply = self.failed_reply()
        if reply is None or self.busy or not self._can_generate():
            return False
        self._delete_from(reply.id)
        return self._start_reply(context_overflow=context_overflow)

    def take_back(self) -> str | None:
        """Remove the last user message and its failed reply; returns the message's text (to edit it)."""
        reply = self.failed_reply()
        if reply is None or self.busy or self.conversation is None:
            return None
        msgs = self.store.messages(self.conversation.id)
        users = [m for m in msgs if m.role == "user" and m.id < reply.id]
        if not users:
            return None
        self._delete_from(users[-1].id)
        return users[-1].content

    # ------------------------------------------------------------------ internals
    def failed_reply(self) -> Message | None:
        """The last reply, when it failed (the engine refused or broke off the request)."""
        msgs = self.store.messages(self.conversation.id) if self.conversation is not None else []
        return msgs[-1] if msgs and msgs[-1].role == "assistant" and msgs[-1].state == "error" else None

    def _delete_from(self, message_id: int) -> None:
        assert self.conversation is not None
        self.store.delete_messages_from(self.conversation.id, message_id)
        self.message_removed.emit(message_id)

    def _can_generate(self) -> bool:
        return self.engine.alive and self.engine.loaded_info is not None

    def _truncate_from(self, message_id: int) -> None:
        assert self.conversation is not None
        chat_versions.replace_from(self.store, self.conversation.id, message_id)  # kept as a version (‹1/2›)
        self.message_removed.emit(message_id)

    def history(self, upto_message: Message | None = None) -> list[dict[str, str]]:
        """Chat messages for the engine: system prompt, then turns with text (interrupted replies too)."""
        assert self.conversation is not None
        out: list[dict[str, str]] = []
        if self.conversation.system_prompt.strip():
            out.append({"role": "system", "content": self.conversation.system_prompt})
        for m in self.store.messages(self.conversation.id):
            if m.role in ("user", "assistant") and m.content and m.state != "streaming":
                out.append({"role": m.role, "content": m.content})
        return out

    def _start_reply(self, continue_message: Message | None = None, context_overflow: str | None = None) -> bool:
        assert self.conversation is not None
        messages = self.history()
        request_id = self.engine.new_request_id()
        sampling = dataclasses.replace(self.sampling, stop=list(self.sampling.stop))
        if continue_message is not None:
            reply = continue_message
            self.store.update_message(reply.id, state="streaming")
        else:
            reply = self.store.add_message(self.conversation.id, "assistant", "", state="streaming",
                                           model=self.model_path)
            self.message_added.emit(reply)
        self._writer = StreamWriter(self.store, reply.id)
        self._writer.text = reply.content
        self._reasoning = reply.reasoning
        self._reasoning_saved = len(reply.reasoning)
        self._reply_id = reply.id
        self._reply_conversation = self.conversation.id
        self._request = request_id
        self._stop_reason = None
        self.reply_started.emit(reply.id)
        self.engine.generate(P.Generate(request_id=request_id, messages=messages, sampling=sampling,
                                        prompt_lookup=self.prompt_lookup,
                                        context_overflow=context_overflow or self.context_overflow,
                                        conversation_id=str(self.conversation.id)))  # its KV is saved by chat
        self._flush_timer.start()
        self.busy_changed.emit(True)
        return True

    def _flush(self) -> None:
        if self._writer is not None and not self._closed:
            self._writer.maybe_flush()
            self._save_reasoning()

    def _flush_all(self) -> None:
        if self._writer is not None and not self._closed:
            self._writer.flush()
            self._save_reasoning()

    def _save_reasoning(self) -> None:
        """Thinking is saved on the same 250 ms beat as the answer, so a crash keeps it too."""
        if self._reply_id is not None and len(self._reasoning) != self._reasoning_saved:
            self.store.update_message(self._reply_id, reasoning=self._reasoning)
            self._reasoning_saved = len(self._reasoning)

    def _on_reasoning(self, request_id: str, text: str) -> None:
        if self._closed or request_id != self._request or self._reply_id is None:
            return
        self._reasoning += text
        self.stream_reasoning.emit(self._reply_id, text)

    def _on_tokens(self, request_id: str, text: str, times: list[float]) -> None:
        if self._closed or request_id != self._request or self._writer is None or self._reply_id is None:
            return
        self._writer.append(text)
        self.stream_text.emit(self._reply_id, text)
        self.tokens_timed.emit(times)

    def _on_done(self, done: P.Done) -> None:
        if self._closed or done.request_id != self._request or self._writer is None or self._reply_id is None:
            return
        reason = done.finish_reason
        if reason == "cancelled" and self._stop_reason:
            reason = self._stop_reason
        state = "interrupted" if done.finish_reason == "cancelled" else "complete"
        self._end(state, metrics=done.metrics, finish_reason=reason)

    def _on_error(self, error: P.Error) -> None:
        if self._closed or self._request is None:
            return
        if error.fatal:
            self._end("interrupted", error=error.message, finish_reason=ENGINE_DIED)
        elif error.request_id == self._request:  # errors of other commands leave the reply alone
            self._end("error", error=error.message)

    def _end(self, state: str, metrics: dict[str, Any] | None = None, finish_reason: str | None = None,
             error: str | None = None) -> None:
        assert self._writer is not None and self._reply_id is not None
        self._flush_timer.stop()
        self._writer.flush()
        self.store.update_message(self._reply_id, content=self._writer.text, state=state, metrics=metrics,
                                  finish_reason=finish_reason, error=error, reasoning=self._reasoning)
        reply_id = self._reply_id
        self._request = None
        self._reply_id = None
        self._reply_conversation = None
        self._stop_reason = None
        self._writer = None
        msg = self.store.message(reply_id)
        if msg is not None:
            self.message_finished.emit(msg)
        self.busy_changed.emit(False)

    def _abandon(self) -> None:
        """The window is closing mid-reply: keep what arrived, mark it interrupted."""
        if self._request is not None:
            self._end("interrupted", error="the window was closed while this reply was being written")
