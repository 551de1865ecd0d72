"""The message view's layout settles, whatever the text and the width (the window once overflowed its stack
in a resize -> fit -> resize loop on one reply mixing English and Devanagari, at every start).

Random text mixing scripts (Latin, Devanagari, CJK, Hangul, Arabic and Hebrew, emoji ZWJ sequences, combining
marks, zero-width and bidi controls, 5,000-character words, long code blocks, Markdown tables) is streamed and
re-rendered at widths from 200 to 2,000 px with resizes in between. A guard counts resize events reaching the
message bodies: a resize may take a few passes to settle, never an unbounded number. Past the cap the guard
swallows the event (which breaks a synchronous loop instead of overflowing the stack) and the test fails.
Seeded and bounded: the same texts and widths every run, a few seconds.
"""

from __future__ import annotations

import os
import random
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from PySide6.QtCore import QEvent, QObject
from PySide6.QtWidgets import QApplication, QTextBrowser

from app.core.chat.store import Message
from app.ui.chat.message_view import MessageView

DATA = Path(__file__).parents[2] / "data"
BAND = (-3, -2, -1)  # heights around the content's height tried at each width
PASS_CAP = 12  # resize events one message body may get while one resize settles
SETTLE_ROUNDS = 30  # event-loop turns allowed to settle

PIECES = [
    "decode is memory-bandwidth bound because every weight is read once per token",
    "निम्नलिखित में से प्रत्येक का तीन शब्दों के साथ किस तरह समस्या है।)}.",
    "क्षत्रिय ज्ञान श्री द्व्य र्‍य",
    "解码阶段受内存带宽限制，因为每个标记都要读取全部权重。",
    "日本語のテキストと漢字かな交じり文、句読点。",
    "디코딩은 메모리 대역폭에 묶여 있습니다. 한글 자모 각",
    "فك التشفير محدود بعرض نطاق الذاكرة لأن كل وزن يُقرأ مرة لكل رمز",
    "הפענוח מוגבל ברוחב הפס של הזיכרון",
    "mixed \u202eRTL override\u202c and \u200fmarks\u200e here",
    "👩‍👩‍👧‍👦 🏳️‍🌈 👨🏽‍💻 🧑‍🤝‍🧑 🇩🇪 1️⃣ ❤️‍🔥",
    "Z̴̡̧̛͇͓̈́͌a̶̢͎̱̓l̷̰̈g̸̝̈́o̵͍͒ e\u0301\u0302\u0303\u0304\u0305\u0306",
    "zero\u200bwidth\u200bspaces\u200band\u200cnon\u200djoiners\u2060everywhere",
    "tab\tseparated\twords and  double  spaces",
]


# Lines of a real reply that locked a user out (English with Devanagari, numbered lists).
PIECES += [line for line in (DATA / "crash-reply.txt").read_text(encoding="utf-8").splitlines() if line.strip()]


def _long_word(rng: random.Random) -> str:
    alphabet = "abcdefghijklmnopqrstuvwxyzअआइईउकखगघ漢字한글"
    return "".join(rng.choice(alphabet) for _ in range(5000))


def _code_block(rng: random.Random) -> str:
    lines = [f"    x_{i} = {'[' * rng.randint(0, 3)}{rng.random()!r} * {'y' * rng.randint(1, 300)}" for i in range(40)]
    return "```python\n" + "\n".join(lines) + "\n```"


def _table(rng: random.Random) -> str:
    cols = rng.randint(2, 6)
    head = "| " + " | ".join(rng.choice(PIECES)[:20] for _ in range(cols)) + " |"
    rule = "|" + "---|" * cols
    rows = ["| " + " | ".join(rng.choice(PIECES)[: rng.randint(1, 60)] for _ in range(cols)) + " |"
            for _ in range(rng.randint(1, 6))]
    return "\n".join([head, rule, *rows])


def random_reply(rng: random.Random) -> str:
    parts: list[str] = []
    for _ in range(rng.randint(3, 10)):
        kind = rng.random()
        if kind < 0.06:
            parts.append(_long_word(rng))
        elif kind < 0.14:
            parts.append(_code_block(rng))
        elif kind < 0.22:
            parts.append(_table(rng))
        elif kind < 0.40:
            parts.append("\n".join(f"{i + 1}. {rng.choice(PIECES)}" for i in range(rng.randint(2, 12))))
        elif kind < 0.45:
            parts.append("# " + rng.choice(PIECES))
        else:
            parts.append(" ".join(rng.choice(PIECES) for _ in range(rng.randint(1, 8))))
    return "\n\n".join(parts)


class ResizeGuard(QObject):
    """Counts resize events reaching message bodies; past the cap it swallows them and remembers it."""

    def __init__(self, cap: int):
        super().__init__()
        self.cap = cap
        self.counts: dict[int, int] = {}
        self.overflow = 0

    def eventFilter(self, obj: QObject, event: QEvent) -> bool:  # Qt's API name
        if event.type() == QEvent.Type.Resize and isinstance(obj, QTextBrowser):
            n = self.counts.get(id(obj), 0) + 1
            self.counts[id(obj)] = n
            if n > self.cap:
                self.overflow += 1
                return True
        return False


def _settle(guard: ResizeGuard) -> int:
    """Run the event loop until no body is resized any more; returns the most events one body got."""
    guard.counts.clear()
    seen = -1
    for _ in range(SETTLE_ROUNDS):
        QApplication.processEvents()
        total = sum(guard.counts.values())
        if total == seen:
            return max(guard.counts.values(), default=0)
        seen = total
    raise AssertionError(f"layout still changing after {SETTLE_ROUNDS} event-loop turns: {guard.counts}")


def _reopen_in_band(view: MessageView, guard: ResizeGuard, width: int, content: int) -> int:
    """Show the view again as the window shows it at start (at a first size, then at once at its real width),
    with heights around `content`, the messages' height at `width`: the band where the scroll bar is needed
    at one width and not at the other. The old resize -> fit -> resize loop never left it for the crash
    reply (its reproduction: shown at 424 x 480 px, then set to 539 x 659 px; a hidden and re-shown view
    behaves as a new one and costs no re-render)."""
    worst = 0
    for delta in BAND:
        view.hide()
        view.resize(max(160, width - 115), max(120, content - 179))
        view.show()
        view.resize(width, content + delta)
        worst = max(worst, _settle(guard))
        if guard.overflow:
            break
    return worst


def _content_height(view: MessageView) -> int:
    inner = view.widget()
    height = inner.layout().totalHeightForWidth(inner.width())
    return height if height > 0 else inner.sizeHint().height()  # a layout without height-for-width


@pytest.fixture
def guard():  # type: ignore[no-untyped-def]
    g = ResizeGuard(PASS_CAP)
    app = QApplication.instance()
    assert app is not None
    app.installEventFilter(g)
    yield g
    app.removeEventFilter(g)


def test_random_scripts_streamed_at_random_widths_always_settle(qtbot, guard) -> None:
    rng = random.Random(20261130)
    view = MessageView()
    qtbot.addWidget(view)
    reopened = MessageView()  # the same replies opened as at a start
    qtbot.addWidget(reopened)
    view.resize(900, 700)
    view.show()
    qtbot.waitExposed(view)
    worst = 0
    started = time.monotonic()
    for n in range(4):
        text = random_reply(rng)
        if n % 2 == 0:  # at most two replies in view: the cost is in laying bodies out, not in their number
            view.clear()
            reopened.clear()
        now = time.time()
        msg = Message(n + 1, 1, "assistant", "", "streaming", None, None, None, None, now, now)
        view.add_message(msg)
        pos = 0
        while pos < len(text):  # stream in random chunks, resizing now and then
            step = rng.randint(1, 1500)
            view.append_text(msg.id, text[pos:pos + step])
            pos += step
            if rng.random() < 0.25:
                view.resize(rng.randint(200, 2000), rng.randint(300, 1200))
            worst = max(worst, _settle(guard))
        done = Message(msg.id, 1, "assistant", text, "complete", None, None, "stop", None, now, now)
        view.update_message(done)  # the whole reply re-rendered at once
        reopened.add_message(done)
        worst = max(worst, _settle(guard))
        for width in [rng.randint(200, 2000) for _ in range(2)] + [200, 2000]:
            view.resize(width, 4000)
            worst = max(worst, _settle(guard))
            worst = max(worst, _reopen_in_band(reopened, guard, width, _content_height(view)))
            view.resize(width, rng.randint(300, 1200))
            worst = max(worst, _settle(guard))
            assert guard.overflow == 0, f"a message body was resized more than {PASS_CAP} times in one settle"
        widget = view.widget_for(msg.id)
        print(f"message {n}: {len(text)} chars, worst {worst} resizes per body per settle")
        assert widget is not None and widget.body.height() >= widget.body.heightForWidth(widget.body.width()) - 1
    assert guard.overflow == 0
    assert worst <= PASS_CAP
    assert time.monotonic() - started < 120  # bounded: seconds on a quiet machine


def test_the_crash_reply_settles_at_every_width(qtbot, guard) -> None:
    """The reply from the reproduction store, as the window opens it, at widths 200-2000 px."""
    view = MessageView()
    qtbot.addWidget(view)
    view.resize(900, 4000)
    view.show()
    qtbot.waitExposed(view)
    text = (DATA / "crash-reply.txt").read_text(encoding="utf-8")
    now = time.time()
    messages = [Message(1, 1, "user", "Explain in three sentences why decode is memory-bandwidth bound.",
                        "complete", None, None, None, None, now, now),
                Message(2, 1, "assistant", text, "interrupted", None, None, None, None, now, now)]
    reopened = MessageView()
    qtbot.addWidget(reopened)
    for m in messages:
        view.add_message(m)
        reopened.add_message(m)
    for width in [*range(200, 1000, 10), *range(1000, 2001, 50)]:
        view.resize(width, 4000)  # tall: no scroll bar, the content at its own height
        _settle(guard)
        _reopen_in_band(reopened, guard, width, _content_height(view))
        assert guard.overflow == 0, f"width {width}: a message body was resized more than {PASS_CAP} times"


def test_the_reproduction_store_opens(tmp_path: Path, roofline_home: Path) -> None:
    """The store that locked a user out (segfault at every start) opens, offscreen, with no saved geometry."""
    data = roofline_home / "data"
    data.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(DATA / "crash-chats.sqlite3", data / "chats.sqlite3")
    shot = tmp_path / "window.png"
    env = {**os.environ, "QT_QPA_PLATFORM": "offscreen", "ROOFLINE_DEFAULT_MODEL": str(tmp_path / "none.gguf")}
    result = subprocess.run([sys.executable, "-X", "faulthandler", "-m", "app.cli", "gui", "--quit-after", "3",
                             "--screenshot", str(shot)], env=env, capture_output=True, text=True, timeout=120,
                            check=False)
    assert result.returncode == 0, result.stderr[-3000:]
    assert shot.is_file() and "Traceback" not in result.stderr
