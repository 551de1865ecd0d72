"""Messages wrap to the view's width, whatever the length of their metrics line (narrow windows); a streamed
reply renders as the whole one would, at a cost per update that does not grow; the input box's keys."""

from __future__ import annotations

import time

from PySide6.QtCore import Qt

from app.core.chat.store import Message
from app.core.metrics.phase import PhaseMetrics
from app.ui.chat.input_box import InputBox
from app.ui.chat.message_view import MessageView


def test_a_long_metrics_line_never_widens_a_message_past_the_view(qtbot) -> None:
    view = MessageView()
    qtbot.addWidget(view)
    view.resize(420, 500)
    view.show()
    metrics = PhaseMetrics(ttft_ms=123456.0, prefill_tokens=9999, prefill_ms=1.0, decode_tokens=9999,
                           decode_ms=1.0).to_dict()
    now = time.time()
    words = "the sea is wide and deep and the river runs to it " * 12
    widget = view.add_message(Message(1, 1, "assistant", words, "complete", metrics, None, "stop", None, now, now))
    qtbot.waitUntil(lambda: widget.isVisible())
    qtbot.wait(50)
    viewport = view.viewport().width()
    assert widget.width() <= viewport
    assert widget.body.width() <= viewport  # so the body wraps instead of being cut off
    assert "TTFT" in widget.metrics_label.text() and "decode" in widget.metrics_label.toolTip()


# Replies that exercise what plain-text streaming must not get wrong: words after closed and unclosed
# emphasis, trailing and doubled spaces, lines that only become lists or headings once more text arrives,
# numbers at a line start, apostrophes, code, links, tables and quotes (which take the Markdown path).
FAST_CORPUS = [
    ("The history of the printing press begins in Mainz, around 1450. Gutenberg's press   spread fast!\n\n"
     "It changed everything: literacy, religion; science? Yes."),
    "Some **bold words** and then plain ones, *an italic* word, and **unclosed bold that never ends",
    "1\n\n1. first item here\n2. second item, longer\n\n- dash item one\n- dash item two  \n  continued line",
    "# A heading with words\n\nText under it.\n\n## Second heading\n\n2024 was a year. 3 cats sat.",
    "A [link](http://example.com) and `code span` then words.\n\nA table:\n\n| a | b |\n|---|---|\n| 1 | 2 |",
    "> quoted words here\n> more quote\n\nAfter the quote, snake_case and AT&T and 5 * 3 and x_y_z words.",
    "Line with trailing spaces   \nnext line after a hard break\n\n```\ncode block words\n```\n\nEnd words",
    "Setext title\n===\n\nWords, then a line\n---\nand more words at the end of it all",
    "#   Heading   with   spaces   \n\nword\tafter\ttabs and `unclosed code words go on\n\n```\nopen fence words",
    "Intro\n\nname | value\n--- | ---\nalpha | one two three\nbeta | four five   six",
]


def _doc_signature(doc) -> list:  # type: ignore[no-untyped-def]
    """What a reader sees: each block's text, kind and format runs (adjacent equal runs merged)."""
    out = []
    block = doc.begin()
    while block.isValid():
        bf = block.blockFormat()
        runs: list[list] = []
        it = block.begin()
        while not it.atEnd():
            frag = it.fragment()
            cf = frag.charFormat()
            key = (cf.fontWeight(), cf.fontItalic(), cf.fontFixedPitch(), tuple(cf.fontFamilies() or ()),
                   cf.anchorHref(), cf.fontPointSize(), cf.background().color().name())
            if runs and runs[-1][0] == key:
                runs[-1][1] += frag.text()
            elif frag.text():
                runs.append([key, frag.text()])
            it += 1
        out.append((block.text(), bf.headingLevel(), block.textList() is not None,
                    bf.background().color().name(), [tuple(r) for r in runs]))
        block = block.next()
    return out


def _stream_both(qtbot, chunks: list[str]) -> int:  # type: ignore[no-untyped-def]
    """Stream `chunks` into a widget with the fast path and one without; assert they always look the same.
    Returns how many updates took the fast path."""
    from app.ui.chat.message_view import MessageWidget

    now = time.time()
    fast = MessageWidget(Message(1, 1, "assistant", "", "streaming", None, None, None, None, now, now))
    slow = MessageWidget(Message(2, 1, "assistant", "", "streaming", None, None, None, None, now, now))
    qtbot.addWidget(fast)
    qtbot.addWidget(slow)
    slow.fast_append = False
    hits = 0
    for chunk in chunks:
        calls = fast._type_plain_hits
        fast.append(chunk)
        slow.append(chunk)
        hits += fast._type_plain_hits - calls
        assert _doc_signature(fast.body.document()) == _doc_signature(slow.body.document()), fast.text
    return hits


def test_plain_words_typed_in_look_exactly_like_the_markdown_render(qtbot) -> None:
    """The streaming fast path (plain words typed into the document) against the Markdown render of every
    update, over replies cut into chunks at random places, like tokens: same blocks, text and formats."""
    import random
    import re

    fast_hits = 0
    for seed, reply in enumerate(FAST_CORPUS * 4):
        rng = random.Random(seed)
        pieces = re.findall(r"\s*\S+|\s+", reply)
        chunks, i = [], 0
        while i < len(pieces):
            n = rng.choice((1, 1, 2, 3))
            chunk = "".join(pieces[i:i + n])
            i += n
            if chunk[:1].isspace() and rng.random() < 0.3:  # and whitespace alone
                chunks += [chunk[:1], chunk[1:]]
            elif len(chunk) > 3 and rng.random() < 0.3:  # tokens also end mid-word
                cut = rng.randrange(1, len(chunk))
                chunks += [chunk[:cut], chunk[cut:]]
            else:
                chunks.append(chunk)
        fast_hits += _stream_both(qtbot, chunks)
    assert fast_hits > 100  # most updates of prose take the fast path
    # Text that only becomes a list, a heading or a table row once the next token arrives.
    assert _stream_both(qtbot, ["Intro\n\n12", ". twelve items", " more"]) == 1
    assert _stream_both(qtbot, ["Intro\n\n-", " item", " more"]) == 1
    assert _stream_both(qtbot, ["Intro\n\n#", "Title", " more", " "]) == 2
    assert _stream_both(qtbot, ["a | b\n--- | ---\nc | d", " ", "e"]) == 0
    assert _stream_both(qtbot, ["Intro\n\n# Title", " " * 45, "x"]) == 2  # only the line's end is compared


def test_input_box_keys(qtbot):
    box = InputBox()
    qtbot.addWidget(box)
    box.setPlainText("line")
    box.moveCursor(box.textCursor().MoveOperation.End)
    with qtbot.assertNotEmitted(box.submitted):
        qtbot.keyClick(box, Qt.Key.Key_Return, Qt.KeyboardModifier.ShiftModifier)
    assert box.toPlainText() == "line\n"
    with qtbot.waitSignal(box.submitted, timeout=100):
        qtbot.keyClick(box, Qt.Key.Key_Return)
    with qtbot.waitSignal(box.escaped, timeout=100):
        qtbot.keyClick(box, Qt.Key.Key_Escape)


STREAM_MD = """Here is a list:

- one item
- two **items**

```python
def f(x):
    return x < 2

print(f(1))
```

| a | b |
|---|---|
| 1 | 2 |

Final paragraph with `code` and <b>not bold</b>.
"""


def test_streaming_render_matches_full_render_and_stays_cheap(qtbot):
    import re
    import time

    from app.core.chat.store import Message
    from app.ui.chat.message_view import MessageView, stable_prefix_length

    assert stable_prefix_length("a\n\nb") == 3
    assert stable_prefix_length("a\n\n```\nx\n\ny") == 3  # a blank line inside an open fence is not a boundary
    view = MessageView()
    qtbot.addWidget(view)
    view.resize(700, 600)
    streamed = view.add_message(Message(1, 1, "assistant", "", "streaming", None, None, None, None, 0, 0))
    for piece in re.findall(r"\S+\s*|\s+", STREAM_MD):
        streamed.append(piece)
    whole = view.add_message(Message(2, 1, "assistant", STREAM_MD, "complete", None, None, None, None, 0, 0))
    assert streamed.body.toPlainText().split() == whole.body.toPlainText().split()
    assert "<b>" in streamed.body.toPlainText()  # raw HTML from the model stays text
    streamed.copy_button.click()
    from PySide6.QtGui import QGuiApplication

    assert QGuiApplication.clipboard().text() == STREAM_MD  # Copy gives the Markdown source
    # Cost per streamed update does not grow with the reply: compare with one full render, same run.
    long_text = "Some words of text with `code` and **bold** here.\n\n" * 400
    big = view.add_message(Message(3, 1, "assistant", "", "streaming", None, None, None, None, 0, 0))
    big.append(long_text)
    t0 = time.perf_counter()
    for _ in range(20):
        big.append("word ")
    per_update = (time.perf_counter() - t0) / 20
    t0 = time.perf_counter()
    big.set_message(Message(3, 1, "assistant", big.text + "!", "complete", None, None, None, None, 0, 0))
    full = time.perf_counter() - t0
    assert per_update < full / 5, (per_update, full)
