"""The dashboard's Roofline box: the measured bandwidth and compute roofs with the prefill and decode
operating points (from app.ui.dashboard.roofline_math), on log axes labelled at powers of ten. For a remote
server, its own phases against the remote GPU's roofs (app.core.remote.roofline), or why they cannot be drawn."""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
import pyqtgraph as pg
from PySide6.QtWidgets import QGroupBox, QLabel, QVBoxLayout

from app.core.metrics.phase import PhaseMetrics
from app.core.predict.machine_roofs import MachineRoofs, roofs_line, si
from app.core.remote.roofline import RemoteRoof
from app.engine import protocol as P
from app.ui.dashboard import roofline_math
from app.ui.dashboard.plots import PLOT_HEIGHT, empty_label, make_plot
from app.ui.toolkit import theme

_SI_PREFIX = {3: "k", 6: "M", 9: "G", 12: "T"}
LOCAL_EMPTY = "send a message to place prefill and decode"


class RooflinePanel(QGroupBox):
    def __init__(self) -> None:
        super().__init__("Roofline")
        rl = QVBoxLayout(self)
        rl.setContentsMargins(4, 4, 4, 4)
        self.plot_roof = make_plot("", "FLOP/s", "arithmetic intensity (FLOPs/byte)")
        self.plot_roof.setFixedHeight(PLOT_HEIGHT + 80)
        self.plot_roof.setLogMode(x=True, y=True)
        self.plot_roof.showGrid(x=True, y=True, alpha=0.2)
        self.roof_curve = self.plot_roof.plot([], [], pen=pg.mkPen(theme.ROOF, width=2))
        for axis in ("left", "bottom"):
            self.plot_roof.getAxis(axis).enableAutoSIPrefix(False)
        # PlotDataItems (not bare scatter items): only they follow the plot's log mode.
        self.roof_prefill = self.plot_roof.plot([], [], pen=None, symbol="o", symbolSize=12,
                                                symbolBrush=theme.PREFILL, symbolPen=None)
        self.roof_decode = self.plot_roof.plot([], [], pen=None, symbol="s", symbolSize=11,
                                               symbolBrush=theme.DECODE, symbolPen=None)
        self.roof_empty = empty_label(self.plot_roof, LOCAL_EMPTY)
        rl.addWidget(self.plot_roof)
        self.roof_label = QLabel("")
        self.roof_label.setWordWrap(True)
        rl.addWidget(self.roof_label)
        self.roof_legend = QLabel(
            f"<span style='color:{theme.PREFILL}'>●</span> prefill &nbsp; "
            f"<span style='color:{theme.DECODE}'>■</span> decode &nbsp; "
            f"<span style='color:{theme.ROOF}'>━</span> roof = min(compute peak, bandwidth × intensity)")
        self.roof_legend.setWordWrap(True)
        rl.addWidget(self.roof_legend)
        self.roof_explain = QLabel(
            "Decode reads every weight for each token, so it sits on the bandwidth slope; prefill reuses each "
            "weight for a whole batch of prompt tokens, so it climbs toward the compute roof.")
        self.roof_explain.setWordWrap(True)
        rl.addWidget(self.roof_explain)

    def update_roofline(self, loaded: P.Loaded | None, history: list[PhaseMetrics], machine: MachineRoofs | None,
                        n_ubatch: int, device: roofline_math.DeviceRoof | None = None) -> None:
        """`device`: the measured GPU holding the weights, whose roofs replace the machine's."""
        self.setTitle("Roofline")
        self.roof_empty.setText(LOCAL_EMPTY)
        if loaded is None:  # none yet, or ejected: the last model's roof and points are not this one's
            for item in (self.roof_curve, self.roof_prefill, self.roof_decode):
                item.setData([], [])
            self.roof_empty.setVisible(True)
            self.roof_label.setText("Load a model to see where prefill and decode sit.")
            return
        r = roofline_math.build(history, loaded.n_params, loaded.model_size, machine, n_ubatch, device)
        bandwidth = r.bandwidth
        self._draw(r.roof, r.prefill, r.decode, r.ridge)
        bw = f"{bandwidth / 1e9:.1f} GB/s" if bandwidth else r.bandwidth_source
        peak = f"{si(r.peak_flops)}FLOP/s" if r.peak_flops else r.peak_source
        if bandwidth and r.peak_flops and r.bandwidth_source == r.peak_source:  # one source, said once
            text = roofs_line(bandwidth, r.peak_flops, r.peak_source)
        else:
            text = (f"Bandwidth roof: {bw}" + (f" ({r.bandwidth_source})" if bandwidth else "")
                    + f" · compute roof: {peak}" + (f" ({r.peak_source})" if r.peak_flops else ""))
        self.roof_label.setText(text + _decode_share(r.decode, bandwidth))

    def update_remote(self, rr: RemoteRoof, source: str) -> None:
        """A remote server's own phases against its GPU's roofs (`rr`, app.core.remote.roofline), labelled as
        the server's (`source`: "server: vLLM"). Never this machine's roofs: without the remote ones, the box
        draws nothing and says why in one line."""
        self.setTitle(f"Roofline · {source}")
        if rr.unknown:
            self.roof_curve.setData([], [])
            self.roof_prefill.setData([], [])
            self.roof_decode.setData([], [])
            self.roof_empty.setText("no roofs to draw for the remote machine" if rr.bandwidth is None
                                    else "waiting for the server's prefill and decode")
            self.roof_empty.setVisible(True)
            self.roof_label.setText(f"{source}: {rr.unknown}")
            return
        prefill = roofline_math.Point(*rr.prefill) if rr.prefill else None
        decode = roofline_math.Point(*rr.decode) if rr.decode else None
        bandwidth = rr.bandwidth or 0.0
        self._draw(rr.roof, prefill, decode, rr.peak_flops / bandwidth if rr.peak_flops and bandwidth else None)
        roofs = (roofs_line(bandwidth, rr.peak_flops, "") if rr.peak_flops
                 else f"Bandwidth roof: {bandwidth / 1e9:.1f} GB/s · compute roof: not entered")
        self.roof_label.setText(f"{source} · roofs {rr.source} · {roofs}" + _decode_share(decode, bandwidth))

    def _draw(self, roof: Callable[[float], float | None], prefill: roofline_math.Point | None,
              decode: roofline_math.Point | None, ridge: float | None) -> None:
        """The roof curve over the points' range, the two points, and the axes' decade ticks."""
        pts = [p for p in (prefill, decode) if p is not None]
        lo = min([p.intensity for p in pts] + [0.5]) / 3
        hi = max([p.intensity for p in pts] + [(ridge or 1) * 4, 50.0]) * 3
        xs = np.logspace(math.log10(lo), math.log10(hi), 80)
        ys = [roof(x) for x in xs]
        if all(y is not None and math.isfinite(y) for y in ys):
            self.roof_curve.setData(xs, ys)
        else:
            self.roof_curve.setData([], [])
            ys = []
        y_values = [y for y in ys if y] + [p.flops for p in pts]
        self._decade_ticks("bottom", [lo, hi], "")
        if y_values:
            self._decade_ticks("left", [min(y_values), max(y_values)], "FLOP/s")
        self.roof_prefill.setData([prefill.intensity] if prefill else [], [prefill.flops] if prefill else [])
        self.roof_decode.setData([decode.intensity] if decode else [], [decode.flops] if decode else [])
        self.roof_empty.setVisible(not pts)

    def _decade_ticks(self, axis: str, values: list[float], unit: str) -> None:
        """Label a log axis at powers of ten only (pyqtgraph's minor labels pile up into a column)."""
        lo = math.floor(math.log10(max(min(values), 1e-30)))
        hi = math.ceil(math.log10(max(max(values), 1e-30)))

        def label(e: int) -> str:
            if not unit or e < 3:
                return f"{10.0 ** e:g}"
            prefix_exp = min(e // 3 * 3, 12)
            return f"{10 ** (e - prefix_exp)} {_SI_PREFIX[prefix_exp]}"

        major = [(float(e), label(e)) for e in range(lo, hi + 1)]
        minor: list[tuple[float, str]] = []
        if hi - lo <= 2:  # a narrow range shows one decade at most: label 2× and 5× too
            minor = [(e + math.log10(m), label(e).replace("1", str(m), 1)) for e in range(lo, hi) for m in (2, 5)]
        self.plot_roof.getAxis(axis).setTicks([major, minor])


def _decode_share(decode: roofline_math.Point | None, bandwidth: float | None) -> str:
    """" · decode moves 1.2 GB/s = 40 % of the roof": the bytes a decode step reads, against the bandwidth."""
    if decode is None or not bandwidth:
        return ""
    used = decode.flops / decode.intensity
    return f" · decode moves {used / 1e9:.1f} GB/s = {100 * used / bandwidth:.0f} % of the roof"
