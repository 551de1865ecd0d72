"""The window's answer to a message longer than the model's context: a plain sentence in the banner and on
the failed reply instead of the engine's exception, and a choice at once (app.ui.chat.too_long): send it
with its middle cut, raise the context (kept in Settings) and send it once the model is loaded again, or
take it back into the input box to edit it."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from PySide6.QtCore import QObject, QTimer

from app.engine import protocol as P
from app.ui.chat import too_long as T

if TYPE_CHECKING:
    from app.ui.window.main_window import MainWindow


class TooLongFlow(QObject):
    def __init__(self, window: MainWindow):
        super().__init__(window)
        self.window = window
        self._send_when_loaded = False  # the context was raised: send the message again once loaded
        window.engine.error.connect(self._error)  # after the session's: the reply is marked failed first
        window.engine.loaded.connect(self._loaded)

    def _error(self, error: P.Error) -> None:
        too_long = T.read_refusal(error)
        if too_long is None or self.window._closed:
            if error.kind == "load_failed":
                self._send_when_loaded = False  # the raised context did not load: nothing to send on
            return
        w = self.window
        reply = w.session.failed_reply()
        if reply is not None:  # its header's tooltip: the sentence, not the exception
            w.store.update_message(reply.id, error=too_long.text())
            updated = w.store.message(reply.id)
            if updated is not None:
                w.message_view.update_message(updated)
        w.banner.show_message(f"{too_long.text()} Cut its middle, raise the context, or edit it.")
        QTimer.singleShot(0, self, lambda: self._offer(too_long))  # once the engine's event is handled

    def _offer(self, too_long: T.TooLong) -> None:
        w = self.window
        raise_to, why_not = self._raised(too_long)
        choice = T.ask(w, too_long, raise_to, why_not)
        if choice is None:
            return
        w.banner.hide()
        if choice == T.CUT:
            w._apply_sampling()
            w.session.retry(context_overflow="truncate-middle")
        elif choice == T.RAISE and raise_to is not None and w.session.model_path:
            w.settings.n_ctx = raise_to
            w.save_settings()
            self._send_when_loaded = True
            w.load_model(Path(w.session.model_path))
        elif choice == T.EDIT:
            text = w.session.take_back()
            if text is not None:
                w.input.setPlainText(text)
                w.input.setFocus()
        w._update_buttons()

    def _raised(self, too_long: T.TooLong) -> tuple[int | None, str]:
        """The context to offer, or None and why not."""
        from app.core.predict.load_plan import plan_load

        w = self.window
        loaded = w.engine.loaded_info
        if loaded is None or w.engine.remote is not None or not w.session.model_path:
            return None, "The server sets its own context."
        ctx = T.raised_context(too_long, w.session.sampling.max_tokens, loaded.n_ctx_train)
        if ctx is None:
            return None, f"The model was trained for {loaded.n_ctx_train} tokens of context: not enough for it."
        model = Path(w.session.model_path)
        if plan_load(model, w.settings.model_copy(update={"n_ctx": ctx}), tuned=lambda _: None).values["n_ctx"] != ctx:
            return None, "This model's preset sets its context: change it with Preset… to raise it."
        if not T.memory_allows(model, loaded.n_ctx, ctx, loaded.type_k):
            return None, f"A context of {ctx} tokens would not fit in the memory available."
        return ctx, ""

    def _loaded(self, _loaded: P.Loaded) -> None:
        if self._send_when_loaded:
            self._send_when_loaded = False
            QTimer.singleShot(0, self, self._send_again)

    def _send_again(self) -> None:
        w = self.window
        w._apply_sampling()
        w.session.retry()
        w._update_buttons()
