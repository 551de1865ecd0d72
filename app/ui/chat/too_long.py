"""A message longer than the model's context: the engine's refusal read into its two numbers, and the ways
out offered in its place (cut the middle and send; raise the context and send, when the model was trained
for it and the machine has the memory; edit the message), instead of a Python exception's name and nothing
to do about it.

The engine drops the oldest turns of a chat before it refuses, so a refusal means the message itself (with
the system prompt) does not fit: a new chat would not hold it either, and is not offered.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from PySide6.QtWidgets import QMessageBox, QWidget

from app.engine import protocol as P

CUT, RAISE, EDIT = "cut", "raise", "edit"
MAX_RAISED_CTX = 131072  # a context past this is a choice for Settings, not for one button

# The engine's words (app.engine.llama: the prompt's token count against the context)
_REFUSAL = re.compile(r"The (?:message|prompt) is (\d+) tokens but the context holds (\d+)")


@dataclass(frozen=True)
class TooLong:
    tokens: int
    n_ctx: int

    def text(self) -> str:
        return f"This message is {self.tokens} tokens, but the model's context holds {self.n_ctx}."


def read_refusal(error: P.Error) -> TooLong | None:
    """The sizes from the engine's refusal of a prompt over the context, or None for any other error."""
    if error.kind != "bad_request":
        return None
    m = _REFUSAL.search(error.message)
    return TooLong(int(m.group(1)), int(m.group(2))) if m else None


def raised_context(too_long: TooLong, max_tokens: int, n_ctx_train: int) -> int | None:
    """The context that holds the message and a reply of `max_tokens` (a power of two, as contexts are
    usually chosen), at most what the model was trained for; None when even that is too small."""
    need = too_long.tokens + max(1, max_tokens)
    ctx = 1 << (need - 1).bit_length()
    if n_ctx_train > 0:
        ctx = min(ctx, n_ctx_train)
    ctx = min(ctx, MAX_RAISED_CTX)
    return ctx if ctx >= need and ctx > too_long.n_ctx else None


def memory_allows(model: Path, n_ctx_now: int, n_ctx_new: int, type_kv: str) -> bool:
    """True when the larger KV cache and buffers of `n_ctx_new` fit in the memory available now."""
    import psutil

    from app.core.gguf.info import inspect_gguf
    from app.core.predict.memory import MemoryConfig, estimate_memory

    try:
        info = inspect_gguf(model)
        now, new = (estimate_memory(info, MemoryConfig(n_ctx=n, type_k=type_kv, type_v=type_kv), has_gpu=False)
                    for n in (n_ctx_now, n_ctx_new))
    except (OSError, ValueError):
        return False
    return new.total - now.total < psutil.virtual_memory().available


def ask(parent: QWidget, too_long: TooLong, raise_to: int | None, why_not_raise: str) -> str | None:
    """CUT, RAISE or EDIT as the user chooses; None for Cancel (the refused message stays as it is)."""
    box = QMessageBox(QMessageBox.Icon.Warning, "Message too long", too_long.text(), parent=parent)
    box.setInformativeText(
        "Cut the middle: the start and the end of the message are kept, the middle is left out of this "
        "request. " + (f"Raise the context: the model is loaded again with {raise_to} tokens of context "
                       "(kept in Settings), then the message is sent." if raise_to else why_not_raise))
    cut = box.addButton("Cut the middle and send", QMessageBox.ButtonRole.AcceptRole)
    raised = (box.addButton(f"Raise the context to {raise_to} and send", QMessageBox.ButtonRole.AcceptRole)
              if raise_to else None)
    edit = box.addButton("Edit the message", QMessageBox.ButtonRole.ActionRole)
    box.addButton(QMessageBox.StandardButton.Cancel)
    box.setDefaultButton(cut)
    box.exec()
    clicked = box.clickedButton()
    if clicked is cut:
        return CUT
    if raised is not None and clicked is raised:
        return RAISE
    if clicked is edit:
        return EDIT
    return None
