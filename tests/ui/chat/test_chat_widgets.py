"""Widget-level tests without the engine: list models, conversation panel, input keys, Markdown escaping,
settings dialog, broken settings file, the no-display message, roofline arithmetic."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from PySide6.QtCore import Qt

from app.commands.gui import NO_DISPLAY_EXIT, display_problem
from app.core.chat.store import ChatStore
from app.core.config import settings as S
from app.core.metrics.phase import PhaseMetrics
from app.ui.chat.conversation_list import ConversationIdRole, ConversationListModel, ConversationPanel
from app.ui.chat.markdown_render import markdown_to_html, plain_to_html
from app.ui.chat.message_view import InputBox
from app.ui.dashboard import roofline_math as roofline_model
from fake_engine import gemma_loaded

OFFSCREEN_NOISE = pytest.mark.qt_log_ignore("This plugin does not support propagateSizeHints")
pytestmark = [pytest.mark.gui]
ROOT = Path(__file__).resolve().parents[3]


def _store_with(titles: list[str]) -> ChatStore:
    store = ChatStore()
    for t in titles:
        conv = store.create_conversation(t)
        store.add_message(conv.id, "user", f"about {t.lower()}")
    return store


def test_conversation_model_passes_modeltester(qtmodeltester):
    store = _store_with(["Alpha", "Beta", "Gamma"])
    model = ConversationListModel(store)
    qtmodeltester.check(model, force_py=True)  # stays connected: the changes below are checked too
    assert [model.index(r).data() for r in range(model.rowCount())] == ["Gamma", "Beta", "Alpha"]
    model.set_search("beta")
    assert model.rowCount() == 1
    assert model.setData(model.index(0), "Renamed")
    assert store.conversation(model.index(0).data(ConversationIdRole)).title == "Renamed"  # type: ignore[union-attr]
    model.set_search("")
    assert model.rowCount() == 3


def test_panel_search_rename_delete(qtbot):
    store = _store_with(["Alpha", "Beta"])
    panel = ConversationPanel(store)
    qtbot.addWidget(panel)
    opened: list[int] = []
    panel.open_requested.connect(opened.append)
    qtbot.keyClicks(panel.search, "alph")
    assert panel.model.rowCount() == 1
    panel.search.clear()
    assert panel.model.rowCount() == 2
    index = panel.model.index(1)
    qtbot.mouseClick(panel.view.viewport(), Qt.MouseButton.LeftButton, pos=panel.view.visualRect(index).center())
    assert opened == [index.data(ConversationIdRole)]
    with qtbot.waitSignal(panel.deleted) as blocker:
        panel.delete_current()
    assert blocker.args == [opened[0]]
    assert [c.title for c in store.list_conversations()] == ["Beta"]


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


def test_markdown_escapes_html_and_renders_code():
    out = markdown_to_html("Hi <script>alert(1)</script> **bold**\n\n```python\nx = 1 < 2\n```\n")
    assert "<script>" not in out and "&lt;script&gt;" in out
    code_text = re.sub(r"<[^>]+>", "", out.split("<pre><code>", 1)[1])  # its highlighting spans apart
    assert "<strong>bold</strong>" in out and "<pre><code" in out and "x = 1 &lt; 2" in code_text
    assert plain_to_html("a <b>\n**c**") == "<p>a &lt;b&gt;<br>**c**</p>"


@OFFSCREEN_NOISE
def test_settings_dialog_round_trip(qtbot):
    from app.ui.settings.dialog import AUTO, SettingsDialog

    dlg = SettingsDialog(S.Settings())
    qtbot.addWidget(dlg)
    assert dlg.gpu_layers.value() == AUTO and dlg.threads.value() == 0
    dlg.n_ctx.setValue(8192)
    dlg.threads.setValue(2)
    dlg.kv_type.setCurrentIndex(dlg.kv_type.findData("q8_0"))
    dlg.flash.setCurrentIndex(dlg.flash.findData(True))
    dlg.sampling.temperature.setValue(0.3)
    dlg.sampling.seed_fixed.setChecked(True)
    dlg.sampling.seed.setValue(42)
    dlg.cpu_moe.setValue(6)
    result = dlg.result_settings()
    S.save_settings(result)
    loaded = S.load_settings().settings
    assert (loaded.n_ctx, loaded.threads, loaded.kv_cache_type, loaded.flash_attn) == (8192, 2, "q8_0", True)
    assert loaded.n_cpu_moe == 6
    assert loaded.n_gpu_layers is None
    assert (loaded.sampling.temperature, loaded.sampling.seed) == (0.3, 42)
    # A quantized cache with flash attention off is refused with a visible reason.
    dlg.flash.setCurrentIndex(dlg.flash.findData(False))
    dlg._accept()
    assert "flash attention" in dlg.warning.text() and dlg.result() == 0


@OFFSCREEN_NOISE
def test_broken_settings_file_warns_in_window(qtbot, roofline_home):
    from app.ui.window.main_window import MainWindow

    S.settings_path().write_text("{\"n_ctx\": ")
    win = MainWindow()
    qtbot.addWidget(win)
    assert win.banner.isVisibleTo(win) and "could not be used" in win.banner.label.text()
    assert not win.banner.restart_button.isVisibleTo(win)
    backups = list((roofline_home / "config").glob("settings.json.bak-*"))
    assert len(backups) == 1 and backups[0].read_text() == "{\"n_ctx\": "
    assert win.settings.n_ctx == 4096
    win.sampling_panel.max_tokens.setValue(77)
    win.close()
    saved = json.loads(S.settings_path().read_text())
    assert saved["sampling"]["max_tokens"] == 77 and saved["window"]["geometry"]


@OFFSCREEN_NOISE
def test_window_list_models(qtbot, qtmodeltester):
    from app.ui.window.main_window import MainWindow

    _store_with(["One", "Two"]).close()
    win = MainWindow()
    qtbot.addWidget(win)
    qtmodeltester.check(win.conversations.model, force_py=True)
    qtmodeltester.check(win.model_combo.model(), force_py=True)
    assert win.model_combo.count() >= 2  # the default model and "Open GGUF file…"
    assert [win.pages.tabText(i) for i in range(win.pages.count())] == ["Chat", "Models", "Lab"]
    from PySide6.QtWidgets import QLabel

    win.add_page("Extra", QLabel("extra"))
    assert win.pages.count() == 4 and win.pages.tabText(3) == "Extra"


def test_display_problem():
    assert display_problem({}, "linux") is not None
    assert display_problem({"DISPLAY": ":0"}, "linux") is None
    assert display_problem({"WAYLAND_DISPLAY": "wayland-0"}, "linux") is None
    assert display_problem({"QT_QPA_PLATFORM": "offscreen"}, "linux") is None
    assert display_problem({"QT_QPA_PLATFORM": "xcb", "WAYLAND_DISPLAY": "w"}, "linux") is not None
    assert display_problem({}, "darwin") is None and display_problem({}, "win32") is None


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="display variables are a Linux/X11 thing")
def test_no_display_one_line_and_exit_code_2(roofline_home):
    env = {k: v for k, v in os.environ.items() if k not in ("DISPLAY", "WAYLAND_DISPLAY", "QT_QPA_PLATFORM")}
    proc = subprocess.run([str(Path(sys.executable).parent / "roofline")], check=False, env=env, cwd=ROOT,
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == NO_DISPLAY_EXIT
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "display" in lines[0] and "roofline --help" in lines[0], proc.stderr
    assert "Aborted" not in proc.stderr and "qt.qpa" not in proc.stderr


def test_roofline_points_sit_where_physics_says():
    n_params, model_bytes = 268_000_000, 250_000_000
    m = PhaseMetrics(prefill_tokens=256, prefill_ms=800.0, decode_tokens=100, decode_ms=2500.0, kv_bytes_used=0)
    prefill, decode = roofline_model.operating_points(m, n_params, model_bytes, n_ubatch=512)
    assert decode is not None and prefill is not None
    assert decode.intensity == pytest.approx(2 * n_params / model_bytes)
    assert prefill.intensity == pytest.approx(256 * decode.intensity)
    assert decode.flops == pytest.approx(40.0 * 2 * n_params)  # 40 tok/s
    # Intensity stops growing at the micro-batch: weights are re-read for every ubatch.
    p_small_ubatch, _ = roofline_model.operating_points(m, n_params, model_bytes, n_ubatch=64)
    assert p_small_ubatch is not None and p_small_ubatch.intensity == pytest.approx(64 * decode.intensity)
    r = roofline_model.build([m], n_params, model_bytes, bandwidth=13e9)
    assert r.peak_flops == pytest.approx(prefill.flops) and r.peak_source.startswith("best prefill")
    assert r.roof(decode.intensity) == pytest.approx(13e9 * decode.intensity)  # decode: under the slope
    assert decode.flops < r.roof(decode.intensity)  # type: ignore[operator]
    assert r.ridge is not None and decode.intensity < r.ridge
    assert roofline_model.build([], n_params, model_bytes, None).roof(1.0) is None


def test_dashboard_shows_history_memory_and_roofline(qtbot):
    from app.engine import protocol as P
    from app.ui.dashboard import Dashboard
    from app.ui.engine_link.engine_qt import EngineQt
    from app.ui.window.engine_events import quant_of

    engine = EngineQt()
    dash = Dashboard(engine)
    qtbot.addWidget(dash)
    loaded = gemma_loaded()
    assert quant_of(loaded) == "Q4_K_M"  # type: ignore[arg-type]
    dash.set_loaded(loaded)  # type: ignore[arg-type]
    history = [PhaseMetrics(prompt_tokens=p, reused_tokens=r, prefill_tokens=p - r, prefill_ms=(p - r) * 3.0,
                            ttft_ms=(p - r) * 3.0 + 20, decode_tokens=30, decode_ms=30 * d, generated_tokens=31,
                            itl_ms=[d] * 30, kv_cells_used=p + 31, kv_bytes_used=(p + 31) * 18432)
               for p, r, d in ((20, 0, 25.0), (80, 51, 28.0), (150, 111, 30.0))]
    dash.set_history(history[:2])
    dash.add_metrics(history[2])
    assert dash.card_decode.value.text() == "33.3 tok/s"  # the numbers at once, the plots a frame later
    qtbot.waitUntil(lambda: len(dash.curve_prefill.getData()[0]) == 3, timeout=2000)
    assert dash.itl_lines[0].label.format == "p50 28 ms"  # still the previous reply's histogram
    qtbot.waitUntil(lambda: dash.itl_lines[0].label.format == "p50 30 ms", timeout=2000)
    xs, ys = dash.curve_prefill.getData()
    assert list(xs) == [1, 2, 3] and ys[0] == pytest.approx(history[0].prefill_tps)
    assert list(dash.curve_decode.getData()[1]) == pytest.approx([1000 / 25, 1000 / 28, 1000 / 30])
    assert dash.card_prompt.detail.text() == "39 new · 111 reused"
    assert dash.card_decode.value.text() == "33.3 tok/s"
    dash.on_stats(P.Stats(rss_bytes=500 << 20, kv_cells_used=181, kv_cells_allocated=4096,
                          kv_bytes_used=181 * 18432, kv_bytes_allocated=72 << 20, loaded=True))
    assert dash.kv_bar.value() == 181 and "headroom 3915 tokens" in dash.kv_label.text()
    assert "512 tokens" in dash.swa_label.text()
    # Without a bandwidth measurement the roofline says so; with one, decode sits under the slope.
    assert "not measured yet" in dash.roof_label.text()
    dash.set_bandwidth(13e9, "test")
    (dx,), (dy,) = 10 ** dash.roof_decode.getData()[0], 10 ** dash.roof_decode.getData()[1]  # log-log plot
    (px,), (py,) = 10 ** dash.roof_prefill.getData()[0], 10 ** dash.roof_prefill.getData()[1]
    assert px == pytest.approx(39 * dx)  # prefill batch of 39 new tokens through the same weights
    assert dy < 13e9 * dx and "% of the roof" in dash.roof_label.text()
    assert py == pytest.approx(history[2].prefill_tps * 2 * 268_000_000)
    # Histogram ranges move in 1-2-2.5-5 steps, so live updates rarely redraw the axes.
    from app.ui.dashboard import nice_ceiling

    assert [nice_ceiling(v) for v in (0.9, 1.0, 1.01, 2.2, 30, 51, 0.03)] == pytest.approx(
        [1, 1, 2, 2.5, 50, 100, 0.05])
    # The live histogram follows streamed token timestamps.
    dash.start_reply()
    dash.on_tokens([0.0, 0.02, 0.04])
    dash.on_tokens([0.07])
    assert sum(dash.itl_bars.opts["height"]) == 2  # the first batch is drawn at once
    qtbot.waitUntil(lambda: sum(dash.itl_bars.opts["height"]) == 3, timeout=2000)  # later ones ≤ 2×/s
    assert dash.card_itl.value.text() == "20.0 ms" and "p99 29.8" in dash.card_itl.detail.text()
    assert dash.card_itl.detail.toolTip() == dash.card_itl.detail.text()  # readable on hover when cut
    # A reply that starts right after another ended (its plots still a frame away) draws those plots first,
    # and the finished reply's histogram never lands on the new reply's.
    dash.add_metrics(history[0])
    dash.start_reply()
    assert len(dash.curve_decode.getData()[0]) == 4
    dash.on_tokens([1.0, 1.01])
    qtbot.wait(100)
    assert sum(dash.itl_bars.opts["height"]) == 1 and dash.itl_lines[0].label.format == "p50 10 ms"


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
