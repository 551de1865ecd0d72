"""A small screen (800×600) with the dashboard shown: every control can be reached and nothing is cut; with the
dashboard hidden the window may be lower than the Lab page. Runs on the fake engine: no model process."""

from __future__ import annotations

import itertools
import os
from pathlib import Path

import pytest
from PySide6.QtCore import QPoint, QRect, Qt
from PySide6.QtWidgets import QAbstractScrollArea, QApplication, QScrollArea, QToolBar, QWidget

from app.core.chat.store import ChatStore
from app.core.metrics.phase import PhaseMetrics
from fake_window import make_window, settle

pytestmark = pytest.mark.gui

LONG_TEXT = ("Roofline keeps prefill and decode apart. " * 12).strip()


@pytest.fixture
def window(qtbot, tmp_path: Path):

    store = ChatStore(tmp_path / "chats.sqlite3")
    conv = store.create_conversation("A long chat")
    store.add_message(conv.id, "user", LONG_TEXT)
    reply = store.add_message(conv.id, "assistant", LONG_TEXT, state="interrupted")
    # a slow reply with one long stall: the ITL card's widest detail line ("p99 2530 ms")
    metrics = PhaseMetrics(prompt_tokens=1200, prefill_tokens=1200, prefill_ms=2500.0, ttft_ms=2530.0,
                           decode_tokens=99, decode_ms=1600.0, generated_tokens=100,
                           itl_ms=[15.2] * 90 + [25.3] * 7 + [2530.0] * 2, total_ms=4200.0)
    store.update_message(reply.id, finish_reason="cancelled", metrics=metrics.to_dict())
    win = make_window(qtbot, store=store)
    win.show()
    win.open_conversation(conv.id)
    yield win
    win.close()
    store.close()


def scroll_area_of(widget: QWidget) -> QScrollArea | None:
    parent = widget.parentWidget()
    while parent is not None:
        if isinstance(parent, QScrollArea):
            return parent
        parent = parent.parentWidget()
    return None


def fully_reachable(win: QWidget, widget: QWidget) -> bool:
    """Shown, inside the window, and wholly visible once its scroll area (if any) has scrolled to it."""
    if not widget.isVisibleTo(win):
        return False
    area = scroll_area_of(widget)
    if area is not None:
        # (not ensureWidgetVisible: for a text field it scrolls only its cursor into view)
        inner = area.widget()
        assert inner is not None
        centre = widget.mapTo(inner, widget.rect().center())
        area.ensureVisible(centre.x(), centre.y(), widget.width() // 2 + 1, widget.height() // 2 + 1)
        QApplication.processEvents()
    rect = QRect(widget.mapTo(win, QPoint(0, 0)), widget.size())
    return win.rect().contains(rect) and widget.visibleRegion().boundingRect() == widget.rect()


def not_cut_sideways(area: QAbstractScrollArea) -> bool:
    """A vertical scroller with no horizontal scroll bar must not hold content wider than what it shows."""
    assert isinstance(area, QScrollArea)
    inner = area.widget()
    return inner is not None and inner.width() <= area.viewport().width()


def test_everything_reachable_at_800_by_600_with_the_dashboard(window, qtbot) -> None:
    assert window.dock.isVisible()
    hint = window.minimumSizeHint()
    assert hint.width() <= 800 and hint.height() <= 600, hint
    window.resize(800, 600)
    settle(qtbot)
    assert (window.width(), window.height()) == (800, 600)
    panel = window.sampling_panel
    controls = {
        "Send": window.send_button, "Stop": window.stop_button, "Regenerate": window.regen_button,
        "Continue": window.continue_button, "message box": window.input, "Max tokens": panel.max_tokens,
        "Seed": panel.seed, "Prompt lookup": panel.prompt_lookup, "New chat": window.conversations.new_button,
        "chat search": window.conversations.search, "dock": window.dock,
    }
    controls.update({f"card {card.title.text()}": card for card in window.dashboard.cards})
    for name, widget in controls.items():
        assert fully_reachable(window, widget), f"{name} is cut off or out of reach at 800×600"
    assert not_cut_sideways(window.message_view), "the messages are wider than the chat: text is cut"
    ids = window.message_view.message_ids()
    for mid in ids:
        message = window.message_view.widget_for(mid)
        assert message is not None
        assert fully_reachable(window, message.copy_button)
    assert not_cut_sideways(window.dock.widget()), "the dashboard is wider than its dock"


def test_without_the_dashboard_the_window_goes_lower_than_the_lab_page(window, qtbot) -> None:
    for page in (window.models_page, window.lab_page):
        window.pages.setCurrentWidget(page)
        settle(qtbot)
    window.pages.setCurrentWidget(window.chat_page)
    window.dock.hide()
    settle(qtbot)
    hint = window.minimumSizeHint()
    assert hint.height() <= 480 and hint.width() <= 640, hint
    window.resize(640, 480)
    settle(qtbot)
    assert (window.width(), window.height()) == (640, 480)


def words(text: str) -> list[str]:
    return [word for word in text.split() if word != "·"]


def cards_cut(window) -> list[str]:
    """A card's line drawn wider than its card: the title and detail lines break into lines where they must
    (app.ui.dashboard.card_line), so each of the lines they are drawn as must fit, and hold all their words."""
    cut = []
    for card in window.dashboard.cards:
        for label in (card.title, card.value, card.detail):
            lines = label.lines() if hasattr(label, "lines") else [label.text()]
            wide = any(label.fontMetrics().horizontalAdvance(line) > label.contentsRect().width() for line in lines)
            if wide or words(" ".join(lines)) != words(label.text()):
                cut.append(f"{card.title.text()}: {label.text()!r}")
    return cut


def test_dashboard_cards_show_their_whole_detail_line_in_a_narrow_dock(window, qtbot) -> None:
    window.resize(1600, 1000)  # three columns first, then fewer: the cards must get the height of more rows
    settle(qtbot)
    assert not cards_cut(window)
    window.resize(800, 600)
    settle(qtbot)
    cards = window.dashboard.cards
    assert window.dashboard.card_grid.columns < 3
    for card in cards:
        assert card.height() >= card.minimumSizeHint().height(), f"{card.title.text()} is squashed"
    for a, b in itertools.combinations(cards, 2):
        assert not a.geometry().intersects(b.geometry()), f"{a.title.text()} overlaps {b.title.text()}"
    assert not cards_cut(window)


@pytest.mark.parametrize("size", [(1600, 1000), (800, 600)])
def test_the_widest_latency_line_fits_its_card(window, qtbot, size: tuple[int, int]) -> None:
    # the widest a p95/p99 line gets: three digits of ms each, or seconds beyond 1000 ms (a busy machine)
    for gaps in ([25.3] * 90 + [253.0] * 8 + [999.0] * 2, [15.0] * 80 + [5985.0] * 15 + [6532.0] * 5):
        window.dashboard.add_metrics(PhaseMetrics(decode_tokens=99, decode_ms=1600.0, itl_ms=gaps))
        window.resize(*size)
        settle(qtbot)
        assert not cards_cut(window), window.dashboard.card_itl.detail.text()

    if os.environ.get("ROOFLINE_TEST_SHOTS"):  # to look at the layout by eye
        window.grab().save(str(Path(os.environ["ROOFLINE_TEST_SHOTS"]) / "small-window.png"))


def test_status_bar_shows_ttft_and_decode_rate_while_the_dashboard_is_hidden(window, qtbot) -> None:
    from app.core.chat.store import Message

    speed, line = window.status_speed, window.status_line
    assert "TTFT" not in line.text()  # the dashboard shows them
    window.dock.hide()
    qtbot.waitUntil(lambda: "TTFT" in line.text())
    assert line.part("speed") == "TTFT 2530 ms · decode 61.9 tok/s"  # the opened chat's latest reply
    # a new reply streams: live numbers from the engine's token times, then the final ones
    reply = Message(99, 1, "assistant", "", "streaming", None, None, None, None, 0.0, 0.0)
    window.session.message_added.emit(reply)
    assert "waiting" in line.part("speed")
    started = speed._started
    assert started is not None
    window.session.tokens_timed.emit([started + 0.040, started + 0.060, started + 0.080])
    qtbot.waitUntil(lambda: "(live)" in line.part("speed"))
    assert line.part("speed") == "TTFT 40 ms · decode 50.0 tok/s (live)"
    done = PhaseMetrics(prefill_tokens=10, prefill_ms=30.0, ttft_ms=41.0, decode_tokens=2, decode_ms=40.0)
    window.session.message_finished.emit(Message(99, 1, "assistant", "ab", "complete", done.to_dict(), None,
                                                 "stop", None, 0.0, 0.0))
    assert line.part("speed") == "TTFT 41 ms · decode 50.0 tok/s"
    window.dock.show()
    qtbot.waitUntil(lambda: "TTFT" not in line.text())


def test_narrowing_the_window_gives_the_chat_room_before_the_dashboard(window, qtbot) -> None:
    window.resize(1600, 1000)
    settle(qtbot)
    window.resizeDocks([window.dock], [560], Qt.Orientation.Horizontal)  # a wide dashboard, as a user left it
    settle(qtbot)
    window.resize(800, 600)
    settle(qtbot)
    assert window.dock.width() <= 0.33 * 800
    assert window.message_view.width() >= 300
    window.resize(1600, 1000)  # and back: the dashboard and the sidebar get their widths back
    settle(qtbot)
    assert window.dock.width() == 560
    assert window.chat_page.sizes()[0] >= 259


def test_an_empty_chats_hint_is_not_cut_at_800_px(window, qtbot) -> None:
    window.resize(1600, 1000)
    settle(qtbot)
    window.resize(800, 600)  # as a user narrows it
    window.new_chat()
    settle(qtbot)
    hint = window.message_view._placeholder
    assert hint.isVisibleTo(window)
    assert not_cut_sideways(window.message_view), "the hint is wider than the chat column, cut at its sides"
    assert hint.width() <= window.message_view.viewport().width()


def test_toolbar_buttons_stay_on_the_toolbar_at_800_px(window, qtbot) -> None:
    import dataclasses

    from fake_engine import loaded_event

    # the default model's details, as long as they get: "Q4_K_M · ctx 131072 · template gemma (architecture) …"
    loaded = dataclasses.replace(loaded_event(template="gemma"), chat_template_source="architecture",
                                 n_ctx=131072, load_ms=13662.0)
    window.engine._dispatch(loaded)
    window.resize(800, 600)
    settle(qtbot)
    toolbar = window.findChild(QToolBar, "model_toolbar")
    assert toolbar is not None
    for action in (window.dashboard_action, window.menus.settings):
        button = toolbar.widgetForAction(action)
        assert button is not None and button.isVisible(), f"{action.text()} went into the overflow menu"
