"""The server box's chart with Serve on and no traffic reads "60 s ago … now", as the TTFT plot of an empty chat
has its neutral range; its axis read "-0.4 -0.2 0 0.2 0.4 s ago" (pyqtgraph's default around zero)."""

from __future__ import annotations

from app.core.metrics.serve_traffic import Traffic
from app.ui.dashboard.traffic import ServerTrafficPanel


def poll(t: float) -> Traffic:
    return Traffic(t=t, processing=0, deferred=0, kv_tokens=0, kv_ratio=0.0, decode_tps=0.0, ttft_ms=None,
                   finished=0, tokens_total=0)


def x_range(panel: ServerTrafficPanel) -> list[float]:
    return [round(x, 6) for x in panel.plot.getViewBox().viewRange()[0]]


def test_an_idle_server_chart_spans_the_last_minute(qtbot) -> None:
    panel = ServerTrafficPanel()
    qtbot.addWidget(panel)
    panel.set_url("http://127.0.0.1:8080")
    panel.show()
    assert x_range(panel) == [-60.0, 0.0]
    for t in (1.0, 2.0, 3.0):  # idle polls, a second apart
        panel.on_traffic(poll(t))
    assert x_range(panel) == [-60.0, 0.0]
    panel.on_traffic(poll(100.0))  # polls over more than a minute: the axis reaches back to the first
    assert x_range(panel)[0] <= -99.0 and x_range(panel)[1] == 0.0
    panel.set_url("")
    panel.set_url("http://127.0.0.1:8081")  # served anew: empty, a minute again
    assert x_range(panel) == [-60.0, 0.0]
