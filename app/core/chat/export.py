"""A chat as a file: Markdown to read or paste, JSON to process (with each reply's phase metrics).

Pure functions of the stored conversation and messages. Thinking (a reasoning model's) is kept apart from the
answer in both: Markdown puts it in a `<details>` block marked "Thinking", JSON in a `reasoning` field.
Only the version of each turn the chat shows is exported (earlier versions stay in the store).

What a message says is text, never the export's structure: in Markdown, a line of a message that would become
a heading (`## You` is the turn marker), a setext underline or a rule is escaped, and so is every `<` (no raw
HTML: `<img onerror=…>` stays text), outside code. A message's fenced code is kept as code: rewritten with a
fence of our own (longer than any run of backticks inside, closed at the end of the message even when the
message left it open), so no line inside can close it early and nothing after it can hide in it. A file name
that Windows reserves for a device (`CON.md`, `nul.json`) is refused: nothing is written.
"""

from __future__ import annotations

import errno
import json
import re
import time
from pathlib import Path
from typing import Any

from app.core.chat.store import Conversation, Message
from app.core.files.untrusted import windows_device_name

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


# A fence that opens code at the top level of a message (CommonMark: up to 3 spaces; a backtick fence's info
# string has no backtick). Deeper or quoted fences are not taken as code: their lines are escaped like text,
# which costs a backslash in rare code but never lets a renderer that disagrees see raw structure.
_FENCE_OPEN = re.compile(r"( {0,3})(`{3,}|~{3,})(.*)")
_LANG = re.compile(r"[\w#+.-]*")
# What may come before a block on a line: indentation, blockquote markers and list markers.
_CONTAINER = re.compile(r"[ \t]*(?:>|[-+*](?=[ \t]|$)|\d{1,9}[.)](?=[ \t]|$))")
_HEADING = re.compile(r"[ \t]*#")
_SETEXT = re.compile(r"[ \t]*(?:=+|-+)[ \t]*$")
_RULE = re.compile(r"[ \t]*([-*_])(?:[ \t]*\1){2,}[ \t]*$")
_BACKTICKS = re.compile(r"`+")


def _escape_block(line: str) -> str:
    """The line with what would start a heading, setext underline or rule (after any quote or list markers)
    escaped: `\\#`, `\\-`, `\\*`, `\\_`, and `&#61;` for `=` (not every renderer takes `\\=`)."""
    start = 0
    while True:
        rest = line[start:]
        if _HEADING.match(rest) or _SETEXT.match(rest) or _RULE.match(rest):
            at = start + len(rest) - len(rest.lstrip(" \t"))
            return line[:at] + ("&#61;" + line[at + 1:] if line[at] == "=" else "\\" + line[at:])
        marker = _CONTAINER.match(line, start)
        if marker is None or marker.end() == start:
            return line
        start = marker.end()


def _code_spans(text: str) -> list[tuple[int, int]] | None:
    """Inline code spans of `text` as CommonMark pairs backtick runs; None unless every run pairs cleanly
    within one line (no backslash before a run): otherwise renderers may pair them differently, and then no
    `<` is left raw."""
    runs = list(_BACKTICKS.finditer(text))
    spans, i = [], 0
    while i < len(runs):
        opener = runs[i]
        if opener.start() and text[opener.start() - 1] == "\\":
            return None
        close = next((j for j in range(i + 1, len(runs)) if len(runs[j].group()) == len(opener.group())), None)
        if close is None or "\n" in text[opener.end():runs[close].start()]:
            return None
        spans.append((opener.end(), runs[close].start()))
        i = close + 1
    return spans


def _escape_text(lines: list[str]) -> list[str]:
    """Lines outside code: block structure escaped, and every `<` outside inline code spans."""
    text = "\n".join(_escape_block(line) for line in lines)
    spans = _code_spans(text) or []
    out, at = [], 0
    for start, end in spans:
        out += [text[at:start].replace("<", "&lt;"), text[start:end]]
        at = end
    out.append(text[at:].replace("<", "&lt;"))
    return "".join(out).split("\n")


def _escape_message(text: str) -> list[str]:
    """A message's lines as Markdown that cannot forge the export's structure (the module's docstring)."""
    lines = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")  # a lone \r ends a line too
    out: list[str] = []
    plain: list[str] = []
    i = 0
    while i < len(lines):
        opening = _FENCE_OPEN.fullmatch(lines[i])
        if opening is None or (opening.group(2)[0] == "`" and "`" in opening.group(3)):
            plain.append(lines[i])
            i += 1
            continue
        indent, fence, info = opening.groups()
        closing = re.compile(rf" {{0,3}}{re.escape(fence[0])}{{{len(fence)},}}[ \t]*")
        end = next((j for j in range(i + 1, len(lines)) if closing.fullmatch(lines[j])), len(lines))
        # CommonMark takes up to the opening fence's indentation off each line of the code
        code = [line[min(len(indent), len(line) - len(line.lstrip(" "))):] for line in lines[i + 1:end]]
        lang = info.strip().split(" ")[0]
        ours = _fence("\n".join(code))
        out += _escape_text(plain) if plain else []
        out += [ours + (lang if _LANG.fullmatch(lang) else ""), *code, ours]
        plain = []
        i = end + 1
    out += _escape_text(plain) if plain else []
    return out


def _one_line(text: str) -> str:
    """A title or a note in a heading: one line, no raw HTML."""
    return " ".join(text.split()).replace("<", "&lt;")


def to_markdown(conv: Conversation, messages: list[Message]) -> str:
    lines = [f"# {_one_line(conv.title)}", "",
             f"*Exported from Roofline on {_when(time.time())}; started {_when(conv.created)}.*", ""]
    if conv.system_prompt.strip():
        fence = _fence(conv.system_prompt)
        lines += ["**System prompt**", "", fence, conv.system_prompt, fence, ""]
    for m in messages:
        if m.role not in ("user", "assistant"):
            continue
        who = "You" if m.role == "user" else "Model"
        notes = []
        if m.role == "assistant" and m.model:
            notes.append(model_label(m.model))
        if m.state != "complete":
            notes.append("stopped" if m.finish_reason == "cancelled" else m.state)
        lines += [f"## {who}" + (f" ({_one_line(', '.join(notes))})" if notes else ""), ""]
        if m.reasoning.strip():
            # HTML's details block: collapsed where Markdown is rendered (GitHub, most editors), still plain
            # to read where it is not; the thinking itself stays verbatim inside a fence.
            fence = _fence(m.reasoning)
            lines += ["<details><summary>Thinking</summary>", "", fence + "text", m.reasoning, fence, "",
                      "</details>", ""]
        lines += [*_escape_message(m.content), ""]
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


_REMOTE_MODEL = re.compile(r"(\w+)://([^/\s]+)\S* \(model (.*)\)")


def model_label(model: str) -> str:
    """The name a reply's model is shown by: a local file's name, or a server's model and host
    ("http://host:8080/v1 (model qwen)" is "qwen on host:8080")."""
    remote = _REMOTE_MODEL.fullmatch(model)
    if remote is not None:
        return f"{remote.group(3)} on {remote.group(2)}"
    return Path(model).name


def render(fmt: str, conv: Conversation, messages: list[Message]) -> str:
    if fmt == "md":
        return to_markdown(conv, messages)
    if fmt == "json":
        return to_json(conv, messages)
    raise ValueError(f"unknown export format {fmt!r} (one of {', '.join(FORMATS)})")


SUFFIXES = {".md": "md", ".markdown": "md", ".txt": "md", ".json": "json"}


def format_for(path: Path, fallback: str = "md") -> str:
    """The format a file name asks for (.json is JSON; .md, .markdown and .txt Markdown), else `fallback`."""
    return SUFFIXES.get(path.suffix.lower(), fallback)


def suggested_name(conv: Conversation, fmt: str) -> str:
    """A file name from the title, without characters file systems refuse."""
    safe = "".join(ch if ch.isalnum() or ch in " -_." else "_" for ch in conv.title).strip(" .") or "chat"
    safe = safe[:60]
    if windows_device_name(safe):
        safe = "_" + safe  # `CON` -> `_CON.md` (a suffix would not do: `con.old_` is still `con`)
    return f"{safe}.{fmt}"


def write(path: Path, fmt: str, conv: Conversation, messages: list[Message]) -> None:
    """Write the export, whole or not at all (app/core/files/atomic_write.py). OSError says why: also for a name
    Windows keeps for a device, refused here on every system (the file may be copied there later)."""
    from app.core.files import atomic_write

    if windows_device_name(path.name):
        raise OSError(errno.EINVAL, f"“{path.name}” is a name Windows keeps for a device (CON, PRN, AUX, NUL, "
                                    "COM1–9, LPT1–9); choose another name")
    atomic_write.write_text(path, render(fmt, conv, messages))
