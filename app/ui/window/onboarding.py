"""The first-start note: the bundled model is a tiny demo *base* model, and where to find a real one.

A base model continues text rather than answering, so without this note its odd replies look like a
broken app. The note appears while the default model is loaded and no chat has a message yet.
"""

from __future__ import annotations

from pathlib import Path

from app.core.chat.store import ChatStore

# Short, what to do first: in a small window the banner shows three lines before its More button.
DEMO_MODEL_NOTE = ("A tiny demo base model: its replies will be odd. For chat, Models ▸ Discover recommends "
                   "instruct models for this machine (its list works offline).")


def demo_model_note(loaded_model: str, store: ChatStore) -> str | None:
    """The note to show after `loaded_model` loaded, or None."""
    from app.core.models.default_model import default_model_path

    try:
        is_default = Path(loaded_model).resolve() == default_model_path(ensure=False).resolve()
    except OSError:
        return None
    if not is_default:
        return None
    if any(store.messages(conv.id) for conv in store.list_conversations()):
        return None  # not a first start: the user has chatted already
    return DEMO_MODEL_NOTE
