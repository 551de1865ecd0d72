"""The first-start note: the bundled model is a tiny demo *base* model, and where to find a real one.

A base model continues text rather than answering, so without this note its odd replies look like a
broken app. The note appears while the default model is loaded and no chat has a message yet.
"""

from __future__ import annotations

from pathlib import Path

from app.core.chat.store import ChatStore

DEMO_MODEL_NOTE = ("The bundled model is a tiny demo base model: it continues text rather than following "
                   "instructions, so its replies will often be odd. Models ▸ Discover recommends instruct models "
                   "for this machine (the list and its verdicts work offline).")


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
