"""The Roofline box on a remote server, driven as a user does: Connect to a server… with the remote GPU's
bandwidth and compute typed in, a fake engine serving a recorded vLLM exposition; the server's own prefill and
decode sit against the roofs entered for it (never this machine's), an unknown bandwidth is one line, the
roofs are saved with the server, and a local model brings the local plot back."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from PySide6.QtCore import Qt, QTimer
from PySide6.QtWidgets import QApplication, QDialogButtonBox

from app.core.config.settings import load_settings
from app.core.predict.machine_roofs import MachineRoofs
from app.ui.engine_link.remote_dialog import RemoteDialog
from app.ui.model_bar.selector import CONNECT_REMOTE
from fake_engine import loaded_event
from fake_window import make_window
from metrics_server import FakeEngine

pytestmark = pytest.mark.gui
DATA = Path(__file__).resolve().parents[2] / "data" / "remote_metrics"
N_PARAMS, SIZE = 8_030_000_000, 16_060_000_000  # an 8B model in BF16
# This machine's roofs in the test: far from any GPU's, so a remote plot drawn on them cannot pass for one
LEFT = Qt.MouseButton.LeftButton
LOCAL = MachineRoofs(bandwidth=20e9, peak_flops=0.5e12, threads=2, measured_at="", busy=False, calibrated=False)


@pytest.fixture
def served(fake_engine: tuple[str, FakeEngine]) -> tuple[str, FakeEngine]:
    """A vLLM server as vLLM is: its /metrics, and a model list that does not give the model's size."""
    url, st = fake_engine
    st.bodies["/metrics"] = (DATA / "vllm-b.prom").read_text(encoding="utf-8")
    return url, st


@pytest.fixture
def win(qtbot, tmp_path: Path):  # type: ignore[no-untyped-def]
    from app.core.chat.store import ChatStore

    store = ChatStore(tmp_path / "chats.sqlite3")
    w = make_window(qtbot, store=store)
    w.show()
    w.dashboard.set_machine_roofs(LOCAL)
    yield w
    w.close()
    store.close()


def _answer(qtbot: Any, fill: Callable[[RemoteDialog], None]) -> list[RemoteDialog]:
    """Fill the Connect dialog once it is open (its exec() blocks the test's call) and press OK."""
    seen: list[RemoteDialog] = []

    def later() -> None:
        dialog = QApplication.activeModalWidget()
        if not isinstance(dialog, RemoteDialog):
            QTimer.singleShot(20, later)
            return
        seen.append(dialog)
        fill(dialog)
        ok = dialog.findChild(QDialogButtonBox).button(QDialogButtonBox.StandardButton.Ok)
        qtbot.mouseClick(ok, LEFT)
        if dialog.isVisible():  # refused: the test's fill read the warning; close it as the user would
            dialog.reject()

    QTimer.singleShot(0, later)
    return seen


def _connect(qtbot: Any, win: Any, url: str, *typed: str) -> list[RemoteDialog]:
    """Connect to a server… as the user does: the URL, then bandwidth, compute, parameters, weights typed."""
    def fill(d: RemoteDialog) -> None:
        d.url.setText(url)
        for field, text in zip((d.bandwidth, d.compute, d.params, d.weights), typed, strict=False):
            qtbot.keyClicks(field, text)

    seen = _answer(qtbot, fill)
    win.model_combo.activated.emit(win.model_combo.findData(CONNECT_REMOTE))  # the user picks the entry
    return seen


def _curve(win: Any) -> list[tuple[float, float]]:
    item = win.dashboard.roof_curve  # xData, yData: as set (getData gives them in the plot's log10)
    xs, ys = item.xData, item.yData
    return [] if xs is None else list(zip(xs.tolist(), ys.tolist(), strict=True))


def test_the_servers_phases_sit_on_the_roofs_entered_for_it(qtbot, win, served) -> None:  # type: ignore[no-untyped-def]
    served, _ = served
    _connect(qtbot, win, served, "3350", "989", "8.03", "16.06")
    d = win.dashboard
    qtbot.waitUntil(lambda: d.remote_server.last is not None, timeout=15_000)
    d.set_machine_roofs(LOCAL)  # this machine's roofs arriving meanwhile (the window reads them in the background)
    m = d.remote_server.last
    assert d.roofline.title() == "Roofline · server: vLLM"
    assert d.roof_label.text().startswith("server: vLLM · roofs entered for this server · Bandwidth roof: "
                                          "3350.0 GB/s")
    # the points are the server's rates (not the client's), 2 FLOPs a parameter, the weights read per token
    fpt = 2.0 * N_PARAMS
    dx, dy = (d.roof_decode.xData.tolist(), d.roof_decode.yData.tolist())
    assert dx == pytest.approx([fpt / SIZE]) and dy == pytest.approx([m.decode_tps * fpt])
    px, py = (d.roof_prefill.xData.tolist(), d.roof_prefill.yData.tolist())
    assert py == pytest.approx([m.prefill_tps * fpt]) and px[0] > dx[0]
    # the roof drawn is the remote GPU's: min(989 TFLOP/s, 3350 GB/s x intensity), nowhere this machine's
    curve = _curve(win)
    assert curve and all(y == pytest.approx(min(989e12, 3350e9 * x)) for x, y in curve)
    assert max(y for _, y in curve) == pytest.approx(989e12)
    assert not d.roof_empty.isVisibleTo(d)
    # saved with the server, in the settings file
    saved = load_settings().settings.remote_servers[served]
    assert (saved.bandwidth_gbs, saved.peak_tflops, saved.params_b, saved.weights_gb) == (3350.0, 989.0, 8.03,
                                                                                           16.06)
    # back on a local model: the local plot, on this machine's roofs
    win.engine._dispatch(loaded_event())
    assert d.roofline.title() == "Roofline" and not d.roof_label.text().startswith("server")
    d.set_machine_roofs(LOCAL)
    local = _curve(win)
    assert local and all(y == pytest.approx(LOCAL.roof(x)) for x, y in local)
    assert d.roof_label.text().startswith("Bandwidth roof: 20.0 GB/s")


def test_without_a_bandwidth_the_plot_says_so_and_draws_no_local_roofs(qtbot, win, served) -> None:  # type: ignore[no-untyped-def]
    served, _ = served
    _connect(qtbot, win, served)
    d = win.dashboard
    qtbot.waitUntil(lambda: d.remote_server.last is not None, timeout=15_000)
    d.set_machine_roofs(LOCAL)
    assert d.roof_label.text().startswith("server: vLLM: the remote machine's roofline is unknown")
    assert "\n" not in d.roof_label.text()
    decode_x = d.roof_decode.xData
    assert _curve(win) == [] and (decode_x is None or len(decode_x) == 0)
    assert d.roof_empty.isVisibleTo(d)
    assert served not in load_settings().settings.remote_servers  # nothing entered, nothing saved


def test_the_size_from_the_servers_model_list_or_else_unknown(qtbot, win, served) -> None:  # type: ignore[no-untyped-def]
    served, st = served
    _connect(qtbot, win, served, "2039")  # no model size entered, none given: said, nothing drawn
    d = win.dashboard
    qtbot.waitUntil(lambda: d.remote_server.last is not None, timeout=15_000)
    assert d.roof_label.text().startswith("server: vLLM: the remote model's size is unknown")
    assert _curve(win) == []
    # a server whose model list gives the size (llama-server's meta): placed without it being entered
    st.bodies["/v1/models"] = json.dumps({"data": [{"id": "m", "meta": {"n_params": N_PARAMS, "size": SIZE}}]})
    _connect(qtbot, win, served)  # its URL brings back its bandwidth
    qtbot.waitUntil(lambda: d.roof_decode.xData is not None and len(d.roof_decode.xData) == 1, timeout=15_000)
    assert d.roof_decode.xData.tolist() == pytest.approx([2.0 * N_PARAMS / SIZE])
    assert "compute roof: not entered" in d.roof_label.text()
    assert all(y == pytest.approx(2039e9 * x) for x, y in _curve(win))  # the slope alone, no compute roof


def test_a_saved_servers_roofs_come_back_in_the_dialog(qtbot, win, served) -> None:  # type: ignore[no-untyped-def]
    served, _ = served
    _connect(qtbot, win, served, "2039", "", "70.6", "141")
    qtbot.waitUntil(lambda: win.dashboard.remote_server.last is not None, timeout=15_000)
    seen = _answer(qtbot, lambda d: None)  # opened again: the URL and its roofs are filled in
    win.model_combo.activated.emit(win.model_combo.findData(CONNECT_REMOTE))
    assert seen and [f.text() for f in (seen[0].url, seen[0].bandwidth, seen[0].compute, seen[0].params,
                                        seen[0].weights)] == [served, "2039", "", "70.6", "141"]


@pytest.mark.parametrize("typed, says", [
    (("fast", ""), "GPU memory bandwidth: 'fast' is not a number"),
    (("3,350", ""), "is not a number"),
    (("-5", ""), "must be more than 0 GB/s"),
    (("3350", "1e9"), "Peak compute: 1,000,000,000 TFLOP/s is more than any one server has"),
    (("nan", ""), "must be more than 0"),
    (("3350", "", "8", ""), "Model size: enter both"),
    (("3350", "", "8", "16000"), "2e+03 bytes a parameter, which no format has"),
])
def test_bad_roofs_are_one_line_and_nothing_typed_is_lost(qtbot, typed: tuple[str, ...], says: str) -> None:  # type: ignore[no-untyped-def]
    dialog = RemoteDialog(url="http://127.0.0.1:8000")
    qtbot.addWidget(dialog)
    dialog.show()
    fields = (dialog.bandwidth, dialog.compute, dialog.params, dialog.weights)
    for field, text in zip(fields, typed, strict=False):
        qtbot.keyClicks(field, text)
    ok = dialog.findChild(QDialogButtonBox).button(QDialogButtonBox.StandardButton.Ok)
    qtbot.mouseClick(ok, LEFT)
    assert dialog.isVisible() and dialog.result() != RemoteDialog.DialogCode.Accepted
    assert says in dialog.warning.text() and "\n" not in dialog.warning.text()
    assert tuple(f.text() for f in fields[:len(typed)]) == typed
    for field in fields:  # corrected (a unit typed after the number is fine): accepted
        field.setText("")
    dialog.bandwidth.setText("3350 GB/s")
    qtbot.mouseClick(ok, LEFT)
    assert dialog.result() == RemoteDialog.DialogCode.Accepted
    assert (dialog.roofs.bandwidth_gbs, dialog.roofs.peak_tflops) == (3350.0, None)
