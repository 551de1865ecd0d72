"""Why a reply ended, in the words its header shows: every reply that did not simply finish says so.

The store keeps the engine's finish reason (`stop`, `length`, `context_full`, `cancelled`) and the window adds
its own for endings the engine cannot know: the model was reloaded under the reply (`model_reloaded`) or the
engine process died (`engine_died`). Replies cut short, or stopped at Max tokens, can be continued. Under the
header, a reply whose prompt left out the chat's oldest turns to fit the context says so (`context_note`).
"""

from __future__ import annotations

from dataclasses import dataclass

from app.core.chat.left_out import messages_left_out
from app.core.chat.store import Message

MODEL_RELOADED = "model_reloaded"  # stopped by the window to reload the model (settings changed)
ENGINE_DIED = "engine_died"  # the engine process ended mid-reply
# Finish reasons after which Continue writes more of the same reply.
CONTINUABLE = ("length",)


@dataclass(frozen=True)
class Ending:
    label: str  # short, in the reply's header
    tooltip: str  # the longer reason
    warn: bool  # drawn in the warning colour (the reply is cut short or failed)


def context_note(message: Message) -> str:
    """What the reply's prompt left out of the chat to fit the context (a line under its header), or ""."""
    return messages_left_out(message.metrics) if message.metrics else ""


def ending_of(message: Message) -> Ending:
    """What the header of `message` says about how it ended ("" while it streams or ended naturally)."""
    reason = message.finish_reason
    if message.state == "streaming":
        return Ending("writing…", "", False)
    if message.state == "error":
        return Ending("error", message.error or "", True)
    if message.state == "interrupted":
        if reason == "cancelled":
            return Ending("stopped", "You stopped this reply; Continue writes more of it.", True)
        if reason == MODEL_RELOADED:
            return Ending("stopped: model reloaded", "The model was reloaded (its settings changed) while this "
                          "reply was being written; Continue writes more of it.", True)
        if reason == ENGINE_DIED:
            return Ending("engine crashed", (message.error or "The engine stopped.") +
                          "\nRestart the engine, then Continue or Regenerate.", True)
        return Ending("interrupted", message.error or "", True)  # e.g. the window itself stopped mid-reply
    if reason == "length":
        return Ending("max tokens", "The reply reached Max tokens; Continue writes more of it.", False)
    if reason == "context_full":
        return Ending("context full", "The model's context is full: start a new chat, or raise the context "
                      "size (Settings) or choose a rolling context.", True)
    return Ending("", "", False)


def can_continue(message: Message | None) -> bool:
    """Continue is offered for the last reply when it was cut short or stopped at Max tokens."""
    if message is None or message.role != "assistant":
        return False
    return message.state == "interrupted" or (message.state == "complete"
                                              and message.finish_reason in CONTINUABLE)
