"""The dashboard's Memory box: the engine's KV cache used/allocated and headroom, system RAM, the engine's
resident memory and its VRAM (NVML, where there is an NVIDIA driver), polled once a second.

Two KV figures, kept apart: the KV card is the shown chat's (the tokens its context holds, from its last
reply), the Memory box's bar is the engine's cache as it is now, which another chat, a reload or a warm-up
may have filled or emptied. One number for both showed 154 tokens on a 73-token chat."""

from __future__ import annotations

from typing import Any

import psutil
from PySide6.QtWidgets import QGridLayout, QGroupBox, QLabel, QProgressBar

from app.core.metrics.phase import PhaseMetrics, fmt_bytes
from app.engine import protocol as P
from app.ui.dashboard import live_numbers as dashboard_live
from app.ui.dashboard.cards import Card
from app.ui.engine_link.engine_qt import EngineQt


def chat_kv_cells(history: list[PhaseMetrics]) -> int:
    """The cells the shown chat's context holds: its last reply's prompt and reply (what the engine's cache
    held when that reply ended); 0 for a chat with no reply."""
    if not history:
        return 0
    last = history[-1]
    return last.kv_cells_used or last.prompt_tokens + last.generated_tokens


class MemoryPanel(QGroupBox):
    def __init__(self) -> None:
        super().__init__("Memory")
        self._nvml: Any = None
        self._nvml_tried = False
        self._device_text: str | None = None  # the GPUs from the engine's stats, when it reports any
        ml = QGridLayout(self)
        self.kv_bar = QProgressBar()
        self.kv_label = QLabel("—")
        self.kv_label.setWordWrap(True)
        self.swa_label = QLabel("")
        self.swa_label.setWordWrap(True)
        self.engine_label = QLabel("—")
        self.vram_label = QLabel("")
        self.ram_bar = QProgressBar()
        self.ram_label = QLabel("—")
        for label in (self.engine_label, self.vram_label, self.ram_label):
            label.setWordWrap(True)  # a narrow dock wraps them instead of widening the window
        ml.addWidget(QLabel("KV cache"), 0, 0)
        ml.addWidget(self.kv_bar, 0, 1)
        ml.addWidget(self.kv_label, 1, 0, 1, 2)
        ml.addWidget(self.swa_label, 2, 0, 1, 2)
        ml.addWidget(QLabel("System RAM"), 3, 0)
        ml.addWidget(self.ram_bar, 3, 1)
        ml.addWidget(self.ram_label, 4, 0, 1, 2)
        ml.addWidget(self.engine_label, 5, 0, 1, 2)
        ml.addWidget(self.vram_label, 6, 0, 1, 2)

    def update_kv(self, loaded: P.Loaded | None, stats: P.Stats | None, history: list[PhaseMetrics],
                  card_kv: Card) -> None:
        """The Memory box's bar from the engine's latest stats (0 used before any: a load empties it); the
        KV card from the shown chat's last reply; the GPU line from the devices llama.cpp reported."""
        self._device_text = device_text(loaded, stats)
        if self._device_text is not None:
            self.vram_label.setText(self._device_text)
        if loaded is None:
            self.kv_label.setText("No model loaded.")
            self.kv_bar.setValue(0)
            self.swa_label.setText("")
            card_kv.set("—", "no model loaded")
            return
        if loaded.chat_template_source == "server":
            self.kv_label.setText("The KV cache lives on the remote server: not visible from here.")
            self.kv_bar.setValue(0)
            self.swa_label.setText("")
            card_kv.set("n/a", "remote server")
            return
        engine = stats if stats and stats.loaded else None
        cells_alloc = engine.kv_cells_allocated if engine else loaded.kv_cells_allocated
        bytes_alloc = engine.kv_bytes_allocated if engine else loaded.kv_bytes_allocated
        cells_used = engine.kv_cells_used if engine else 0
        bytes_used = engine.kv_bytes_used if engine else 0
        n_ctx = loaded.n_ctx
        headroom = max(n_ctx - cells_used, 0)
        self.kv_bar.setRange(0, max(cells_alloc, 1))
        self.kv_bar.setValue(min(cells_used, max(cells_alloc, 1)))
        self.kv_bar.setFormat(f"{cells_used} / {cells_alloc} cells")
        self.kv_label.setText(
            f"The engine's cache now: {fmt_bytes(bytes_used)} used of {fmt_bytes(bytes_alloc)} allocated "
            f"({loaded.type_k}/{loaded.type_v}) · headroom {headroom} tokens of {n_ctx}")
        chat = chat_kv_cells(history)
        card_kv.set(f"{chat:,} tok", f"{max(n_ctx - chat, 0):,} tokens free · this chat")
        self.swa_label.setText(dashboard_live.swa_note(loaded))

    def poll(self, engine: EngineQt) -> None:
        """1 Hz: system RAM (psutil), engine RSS (psutil on its pid), VRAM (NVML), KV stats (engine)."""
        vm = psutil.virtual_memory()
        self.ram_bar.setRange(0, 1000)
        self.ram_bar.setValue(int(1000 * (vm.total - vm.available) / max(vm.total, 1)))
        self.ram_bar.setFormat(f"{100 * (vm.total - vm.available) / max(vm.total, 1):.0f} %")
        self.ram_label.setText(f"{fmt_bytes(vm.total - vm.available)} used of {fmt_bytes(vm.total)}, "
                               f"{fmt_bytes(vm.available)} available")
        pid = engine.pid
        if pid is None:
            self.engine_label.setText("Engine process: not running")
        else:
            try:
                rss = psutil.Process(pid).memory_info().rss
                self.engine_label.setText(f"Engine process (pid {pid}): {fmt_bytes(rss)} resident")
            except psutil.Error:
                pass
            engine.request_stats()
        self.vram_label.setText(self._device_text if self._device_text is not None else self._vram_text(pid))

    def _vram_text(self, pid: int | None) -> str:
        if not self._nvml_tried:
            self._nvml_tried = True
            try:
                import pynvml

                pynvml.nvmlInit()
                self._nvml = pynvml
            except Exception:  # noqa: BLE001 (no NVIDIA driver, any NVML failure: the common CPU case)
                self._nvml = None
        if self._nvml is None:
            return "VRAM: no NVIDIA GPU (NVML unavailable)"
        nv = self._nvml
        try:
            parts = []
            for i in range(nv.nvmlDeviceGetCount()):
                h = nv.nvmlDeviceGetHandleByIndex(i)
                info = nv.nvmlDeviceGetMemoryInfo(h)
                mine = sum(p.usedGpuMemory or 0 for p in nv.nvmlDeviceGetComputeRunningProcesses(h)
                           if pid is not None and p.pid == pid)
                parts.append(f"GPU{i}: engine {fmt_bytes(mine)}, {fmt_bytes(info.used)} / {fmt_bytes(info.total)}")
            return "VRAM: " + "; ".join(parts) if parts else "VRAM: no GPU"
        except Exception as exc:  # noqa: BLE001 (NVML errors must not break the dashboard)
            return f"VRAM: unavailable ({exc})"


def device_text(loaded: P.Loaded | None, stats: P.Stats | None) -> str | None:
    """The GPUs as llama.cpp sees them, live: what this engine's buffers hold on each (from llama.cpp's own
    load log) and the device's free memory now. None without a GPU in the engine's stats (then NVML's view)."""
    if stats is None or not stats.devices:
        return None
    parts = []
    for dev in stats.devices:
        mine = {key.split(":")[0]: mib for key, mib in (loaded.buffers_mib if loaded else {}).items()
                if key.endswith(":" + dev["name"])}
        held = sum(mine.values())
        split = " · ".join(f"{kind} {mib:.0f}" for kind, mib in sorted(mine.items()))
        parts.append(f"{dev['name']} ({dev['description']}): this engine {held:.0f} MiB"
                     + (f" ({split})" if split else "") + f"; {fmt_bytes(dev['memory_free'])} free of "
                     f"{fmt_bytes(dev['memory_total'])}")
    return "GPU: " + "; ".join(parts)

