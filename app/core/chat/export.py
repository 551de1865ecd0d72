"""A chat as a file: Markdown to read or paste, JSON to process (with each reply's phase metrics).

Pure functions of the stored conversation and messages. Thinking (a reasoning model's) is kept apart from the
answer in both: Markdown puts it in a `<details>` block marked "Thinking", JSON in a `reasoning` field.
Only the version of each turn the chat shows is exported (earlier versions stay in the store).
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from app.core.chat.store import Conversation, Message

FORMATS = {"md": "Markdown", "json": "JSON"}
JSON_FORMAT = "roofline-chat/1"


def _when(t: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M", time.localtime(t))


def _fence(text: str) -> str:
    """A code fence longer than any run of backticks in `text`, so the text cannot close it."""
    longest = run = 0
    for ch in text:
        run = run + 1 if ch == "`" else 0
        longest = max(longest, run)
    return "`" * max(3, longest + 1)


def to_markdown(conv: Conversation, messages: list[Message]) -> str:
    lines = [f"# {conv.title}", "", f"*Exported from Roofline on {_when(time.time())}; started {_when(conv.created)}.*",
             ""]
    if conv.system_prompt.strip():
        fence = _fence(conv.system_prompt)
        lines += ["**System prompt**", "", fence, conv.system_prompt, fence, ""]
    for m in messages:
        if m.role not in ("user", "assistant"):
            continue
        who = "You" if m.role == "user" else "Model"
        notes = []
        if m.role == "assistant" and m.model:
            notes.append(Path(m.model).name)
        if m.state != "complete":
            notes.append("stopped" if m.finish_reason == "cancelled" else m.state)
        lines += [f"## {who}" + (f" ({', '.join(notes)})" if notes else ""), ""]
        if m.reasoning.strip():
            # HTML's details block: collapsed where Markdown is rendered (GitHub, most editors), still plain
            # to read where it is not; the thinking itself stays verbatim inside a fence.
            fence = _fence(m.reasoning)
            lines += ["<details><summary>Thinking</summary>", "", fence + "text", m.reasoning, fence, "",
                      "</details>", ""]
        lines += [m.content, ""]
    return "\n".join(lines).rstrip("\n") + "\n"


def to_json(conv: Conversation, messages: list[Message]) -> str:
    out: dict[str, Any] = {
        "format": JSON_FORMAT,
        "title": conv.title,
        "system_prompt": conv.system_prompt,
        "created": conv.created,
        "updated": conv.updated,
        "messages": [_message(m) for m in messages if m.role in ("user", "assistant", "system")],
    }
    return json.dumps(out, ensure_ascii=False, indent=2) + "\n"


def _message(m: Message) -> dict[str, Any]:
    d: dict[str, Any] = {"role": m.role, "content": m.content, "created": m.created}
    if m.role == "assistant":
        d.update(reasoning=m.reasoning, state=m.state, finish_reason=m.finish_reason, model=m.model,
                 metrics=m.metrics)
        if m.error:
            d["error"] = m.error
    return d


def render(fmt: str, conv: Conversation, messages: list[Message]) -> str:
    if fmt == "md":
        return to_markdown(conv, messages)
    if fmt == "json":
        return to_json(conv, messages)
    raise ValueError(f"unknown export format {fmt!r} (one of {', '.join(FORMATS)})")


def format_for(path: Path) -> str:
    """The format a file name asks for: .json is JSON, anything else Markdown."""
    return "json" if path.suffix.lower() == ".json" else "md"


def suggested_name(conv: Conversation, fmt: str) -> str:
    """A file name from the title, without characters file systems refuse."""
    safe = "".join(ch if ch.isalnum() or ch in " -_." else "_" for ch in conv.title).strip(" .") or "chat"
    return f"{safe[:60]}.{fmt}"


def write(path: Path, fmt: str, conv: Conversation, messages: list[Message]) -> None:
    """Write the export, whole or not at all (app/core/files/atomic_write.py). OSError says why."""
    from app.core.files import atomic_write

    atomic_write.write_text(path, render(fmt, conv, messages))
