"""Live performance dashboard (a dock): prefill and decode kept apart, in one colour each, everywhere.

Per message: TTFT, prefill tok/s, decode tok/s, ITL percentiles, prompt tokens new vs reused (cards.py). Across
the conversation: prefill tok/s and decode tok/s on two separate plots, TTFT vs prompt length; the current
reply's inter-token-latency histogram updates while it streams (view.py, plots.py). Memory: KV cache
used/allocated, headroom, engine RSS (VRAM via NVML where there is one), system RAM (memory.py). Roofline:
measured bandwidth and compute roofs with the prefill and decode operating points (roofline.py).
"""

from app.ui.dashboard.cards import Card
from app.ui.dashboard.plots import PLOT_HEIGHT, nice_ceiling
from app.ui.dashboard.view import PLOTS_AFTER_MS, Dashboard, DashboardDock

__all__ = ["PLOTS_AFTER_MS", "PLOT_HEIGHT", "Card", "Dashboard", "DashboardDock", "nice_ceiling"]
