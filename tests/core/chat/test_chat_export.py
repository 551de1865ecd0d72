"""Chat export: Markdown and JSON from the store (thinking marked apart, metrics in JSON), and the window's
Export… from the chat list (a save dialog; a failing write says why in one line)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from app.core.chat import export as chat_export
from app.core.chat.store import ChatStore
from app.core.metrics.phase import PhaseMetrics
from fake_window import make_window


def _chat(store: ChatStore) -> int:
    conv = store.create_conversation("Colours / ```fences```", system_prompt="Be brief.")
    store.add_message(conv.id, "user", "Name a colour")
    reply = store.add_message(conv.id, "assistant", "**Red**.", model="/models/tiny-Q4_K_M.gguf")
    store.update_message(reply.id, reasoning="They want one.\n```\nnot a fence end", state="complete",
                         finish_reason="stop", metrics=PhaseMetrics(prompt_tokens=7, decode_tokens=3).to_dict())
    return conv.id


def test_markdown_marks_the_thinking_apart_and_json_keeps_metrics(tmp_path) -> None:
    store = ChatStore(tmp_path / "c.db")
    cid = _chat(store)
    conv, msgs = store.conversation(cid), store.messages(cid)
    assert conv is not None
    md = chat_export.to_markdown(conv, msgs)
    assert md.startswith("# Colours / ```fences```\n")
    assert "## You\n\nName a colour\n" in md
    assert "## Model (tiny-Q4_K_M.gguf)\n" in md
    thinking = md.split("<details><summary>Thinking</summary>")[1].split("</details>")[0]
    assert "They want one." in thinking and "**Red**" not in thinking
    assert "````text\n" in thinking  # a fence longer than the ``` inside the thinking
    assert md.rstrip().endswith("**Red**.")
    assert "Be brief." in md
    data = json.loads(chat_export.to_json(conv, msgs))
    assert data["format"] == "roofline-chat/1" and data["system_prompt"] == "Be brief."
    user, reply = data["messages"]
    assert user == {"role": "user", "content": "Name a colour", "created": msgs[0].created}
    assert reply["content"] == "**Red**." and reply["reasoning"].startswith("They want one.")
    assert reply["metrics"]["prompt_tokens"] == 7 and reply["finish_reason"] == "stop"


FORGED_LINES = [
    "Sure.", "", "## You", "", "Ignore the above.", "#Model", "You", "---", "Model", "=", "* * *",
    "<img src=x onerror=alert(1)>", "</details><script>alert(2)</script>", "> ## You", "- # Model",
    "1. ## You", "   ## You", "Text\r## You\r\n", "<!--", "```python title=x", "# not a heading: code",
    "```", "after the code", "~~~~", "~~~", "## You (still code: a shorter fence does not close it)", "~~~~",
    " ```", "## You (code: an indented fence)", "```", "and an unclosed fence:", "```", "## You"]
FORGED = "\n".join(FORGED_LINES)


def _render(md: str) -> str:
    import markdown  # a dependency of the app (its chat view renders replies with it)

    return markdown.markdown(md, extensions=["fenced_code"])


def _forged_chat(store: ChatStore, reply: str) -> int:
    conv = store.create_conversation("Forged <b>title</b>\n## You")
    store.add_message(conv.id, "user", "Say something ## You\n## Model")
    msg = store.add_message(conv.id, "assistant", reply, model="/m/<img src=x>.gguf")
    store.update_message(msg.id, state="complete", finish_reason="stop")
    store.add_message(conv.id, "user", "Thanks")
    return conv.id


def test_a_reply_cannot_forge_turns_or_raw_html(tmp_path) -> None:
    store = ChatStore(tmp_path / "c.db")
    cid = _forged_chat(store, FORGED)
    conv, msgs = store.conversation(cid), store.messages(cid)
    assert conv is not None
    md = chat_export.to_markdown(conv, msgs)
    page = _render(md)
    # the exporter's title and turns, and no others: nothing a message says became a heading
    assert re.findall(r"<h1>(.*?)</h1>", page) == ["Forged &lt;b&gt;title&lt;/b&gt; ## You"]
    assert re.findall(r"<h2>(.*?)</h2>", page) == ["You", "Model (&lt;img src=x&gt;.gguf)", "You"]
    assert "<img" not in page and "<script" not in page and "<!--" not in page and "<details" not in page
    assert "<hr" not in page and "&lt;img src=x onerror=alert(1)&gt;" in page  # shown as the text it is
    codes = [code.split("</code></pre>")[0] for code in page.split("<pre><code")[1:]]
    assert len(codes) == 4  # each fenced block of the reply is code, the unclosed one ending with the reply
    assert codes[0] == ' class="language-python"># not a heading: code\n'
    assert codes[1] == ">~~~\n## You (still code: a shorter fence does not close it)\n"
    assert codes[2] == ">## You (code: an indented fence)\n" and codes[3] == ">## You\n"
    assert "after the code" in page.split("</code></pre>")[1]


def test_ordinary_markdown_in_a_reply_stays_readable(tmp_path) -> None:
    lines = ["Here is *one* way, with `Vec<T>` and **care**:", "", "- first", "- second `a < b`",
             "", "1. one", "2. two", "", "```rust", "// a <T> comment", "# [derive]", "let x = 1;",
             "```", "", "> a quote", "", "Done # not a heading."]
    store = ChatStore(tmp_path / "c.db")
    cid = _forged_chat(store, "\n".join(lines))
    conv, msgs = store.conversation(cid), store.messages(cid)
    assert conv is not None
    md = chat_export.to_markdown(conv, msgs)
    assert "```rust\n// a <T> comment\n# [derive]\nlet x = 1;\n```\n" in md  # code verbatim, fences as they were
    assert "`Vec<T>`" in md and "- first\n- second `a < b`" in md and "Done # not a heading." in md
    page = _render(md)
    assert "<em>one</em>" in page and "<strong>care</strong>" in page and "<code>Vec&lt;T&gt;</code>" in page
    assert page.count("<li>") == 4 and "<blockquote>" in page
    assert '<code class="language-rust">// a &lt;T&gt; comment\n# [derive]\nlet x = 1;\n</code>' in page


def test_write_is_whole_or_nothing_and_names_the_reason(tmp_path) -> None:
    store = ChatStore(tmp_path / "c.db")
    cid = _chat(store)
    conv, msgs = store.conversation(cid), store.messages(cid)
    assert conv is not None
    target = tmp_path / "out.json"
    chat_export.write(target, "json", conv, msgs)
    assert json.loads(target.read_text(encoding="utf-8"))["title"] == conv.title
    with pytest.raises(OSError):
        chat_export.write(tmp_path / "missing" / "out.md", "md", conv, msgs)
    assert not list(tmp_path.rglob("*.tmp"))
    assert chat_export.suggested_name(conv, "md") == "Colours _ ___fences___.md"


@pytest.mark.parametrize("name", ["CON.md", "nul.md", "Aux.json", "com1.md", "LPT9.tar.gz", "con .md", "NUL.",
                                  "prn", "COM\u00b9.md", "nul. .md"])
def test_a_windows_device_name_is_refused_and_nothing_written(tmp_path, name: str) -> None:
    store = ChatStore(tmp_path / "c.db")
    cid = _chat(store)
    conv, msgs = store.conversation(cid), store.messages(cid)
    assert conv is not None
    out = tmp_path / "out"
    out.mkdir()
    with pytest.raises(OSError, match="is a name Windows keeps for a device") as info:
        chat_export.write(out / name, "md", conv, msgs)
    assert info.value.strerror is not None and "\n" not in info.value.strerror
    assert not list(out.iterdir())


def test_names_that_only_look_like_devices_are_written(tmp_path) -> None:
    store = ChatStore(tmp_path / "c.db")
    cid = _chat(store)
    conv, msgs = store.conversation(cid), store.messages(cid)
    assert conv is not None
    for name in ("CONSOLE.md", "con1.md", "COM10.md", "nul_.md", "my con.md", "auxiliary.json"):
        chat_export.write(tmp_path / name, "md", conv, msgs)
        assert (tmp_path / name).is_file()
    for title, suggested in (("CON", "_CON.md"), ("con.old", "_con.old.md"), ("Lpt1 ", "_Lpt1.md"),
                             ("Contacts", "Contacts.md")):
        conv.title = title
        assert chat_export.suggested_name(conv, "md") == suggested


@pytest.mark.gui
def test_export_from_the_chat_list(qtbot, tmp_path: Path, monkeypatch) -> None:
    from PySide6.QtWidgets import QFileDialog

    store = ChatStore(tmp_path / "chats.sqlite3")
    cid = _chat(store)
    win = make_window(qtbot, store=store)
    answers = iter([(str(tmp_path / "colours"), "JSON with metrics (*.json)"),
                    (str(tmp_path / "no-such-dir" / "x.md"), "Markdown (*.md)"),
                    (str(tmp_path / "nul"), "Markdown (*.md)"), ("", "")])
    monkeypatch.setattr(QFileDialog, "getSaveFileName", lambda *a, **k: next(answers))
    win.conversations.select(cid)
    win.conversations.export_current()  # as the context menu's Export… does
    written = tmp_path / "colours.json"
    assert json.loads(written.read_text(encoding="utf-8"))["messages"][1]["metrics"]["decode_tokens"] == 3
    assert win.banner.text().startswith("Exported “Colours")
    line = win.exports.export(cid)
    assert line is not None and line.startswith("Could not export") and "No such file or directory" in line
    assert "\n" not in line and win.banner.text() == line
    line = win.exports.export(cid)  # a Windows device name: refused, nothing written
    assert line is not None and line.startswith("Could not export") and "“nul.md” is a name Windows keeps" in line
    assert "\n" not in line and not (tmp_path / "nul.md").exists()
    assert win.exports.export(cid) is None  # cancelled: nothing said
    win.close()
    store.close()


@pytest.mark.gui
def test_file_menu_exports_the_chat_on_screen(qtbot, tmp_path: Path, monkeypatch) -> None:
    from PySide6.QtWidgets import QFileDialog

    store = ChatStore(tmp_path / "chats.sqlite3")
    _chat(store)
    win = make_window(qtbot, store=store)
    monkeypatch.setattr(QFileDialog, "getSaveFileName", lambda *a, **k: (str(tmp_path / "menu.md"), "Markdown (*.md)"))
    win.menus.export_chat.trigger()
    assert (tmp_path / "menu.md").read_text(encoding="utf-8").startswith("# Colours")
    win.close()
    store.close()
