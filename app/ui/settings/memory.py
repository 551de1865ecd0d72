"""What the settings' context size and GPU layers cost in memory for the current model, and the largest
that fits this machine — shown under those fields as they change.

The model's header is read and the machine probed once when the dialog opens (no bandwidth measurement);
each change is then a few memory estimates (`app.core.predict.memory`, `app.core.predict.recommend.max_context`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from app.core.metrics.phase import fmt_bytes


@dataclass
class MemoryAdvisor:
    info: Any  # GGUFInfo of the current model
    budget: Any  # recommend.Budget for this machine

    @classmethod
    def for_model(cls, model_path: str | None) -> MemoryAdvisor | None:
        """None when there is no usable local model (a remote server, a broken file)."""
        if not model_path:
            return None
        from app.core.gguf.info import GGUFError, inspect_gguf
        from app.core.predict.hardware import probe_hardware
        from app.core.predict.recommend import memory_budget

        try:
            info = inspect_gguf(model_path)
        except (GGUFError, OSError):
            return None
        if info.n_layers == 0:
            return None
        return cls(info, memory_budget(probe_hardware()))

    def _ngl(self, n_gpu_layers: int | None) -> int:
        has_gpu = self.budget.gpu is not None and self.budget.vram > 0
        if not has_gpu:
            return 0
        return -1 if n_gpu_layers is None else n_gpu_layers

    def _estimate(self, n_ctx: int, kv_type: str, n_gpu_layers: int | None) -> tuple[Any, bool]:
        """The memory estimate at this context and whether it fits the budget (ValueError: no estimate)."""
        from app.core.predict.memory import MemoryConfig, estimate_memory

        ngl = self._ngl(n_gpu_layers)
        has_gpu = ngl != 0
        est = estimate_memory(self.info, MemoryConfig(n_ctx=n_ctx, type_k=kv_type, type_v=kv_type,
                                                      n_gpu_layers=ngl), has_gpu=has_gpu)
        fits = (est.cpu.total <= self.budget.ram and est.gpu.total <= self.budget.vram) if has_gpu else \
            est.cpu.total <= self.budget.ram
        return est, fits

    def largest_context(self, kv_type: str, n_gpu_layers: int | None) -> int:
        from app.core.predict.recommend import max_context

        return max_context(self.info, kv_type, self._ngl(n_gpu_layers), self.budget)

    def context_problem(self, n_ctx: int, kv_type: str, n_gpu_layers: int | None) -> str | None:
        """Why this context cannot be loaded on this machine (the same verdict context_text shows), or None."""
        try:
            fits = self._estimate(n_ctx, kv_type, n_gpu_layers)[1]
        except ValueError as exc:
            return str(exc)
        if fits:
            return None
        return (f"{n_ctx:,} tokens do not fit this machine with this model: at most "
                f"{self.largest_context(kv_type, n_gpu_layers):,} with a {kv_type} cache.")

    def context_text(self, n_ctx: int, kv_type: str, n_gpu_layers: int | None) -> str:
        """The memory this context costs (KV cache and total) and the largest context that fits."""
        try:
            est, fits = self._estimate(n_ctx, kv_type, n_gpu_layers)
        except ValueError as exc:
            return str(exc)
        where = f"RAM {fmt_bytes(est.cpu.total)}" + (f", GPU {fmt_bytes(est.gpu.total)}" if est.gpu.total else "")
        verdict = "fits" if fits else "does NOT fit"
        return (f"KV cache {fmt_bytes(est.kv_bytes)} ({kv_type}) · in all {where}: {verdict} this machine\n"
                + self._largest_line(kv_type, n_gpu_layers))

    def _largest_line(self, kv_type: str, n_gpu_layers: int | None) -> str:
        """The largest context that fits; the search stops at the trained context, so a largest equal to it
        is a cap (more may fit), not this machine's limit."""
        largest, trained = self.largest_context(kv_type, n_gpu_layers), self.info.n_ctx_train
        if trained and largest >= trained:
            return (f"Largest useful with a {kv_type} cache: {largest:,} tokens "
                    "(capped at the trained context, not at this machine's memory)")
        return f"Largest that fits with a {kv_type} cache: {largest:,} tokens" + \
            (f" (trained: {trained:,})" if trained else "")

    def gpu_text(self, n_ctx: int, kv_type: str, n_gpu_layers: int | None) -> str:
        """What the GPU layers put on the GPU, and the most that fit."""
        from app.core.predict.memory import MemoryConfig, estimate_memory
        from app.core.predict.recommend import place

        if self.budget.gpu is None or self.budget.vram <= 0:
            return "No GPU this llama.cpp build can offload to:\nevery layer runs from RAM"
        ngl = self._ngl(n_gpu_layers)
        est = estimate_memory(self.info, MemoryConfig(n_ctx=n_ctx, type_k=kv_type, type_v=kv_type, n_gpu_layers=ngl))
        verdict, best, _ = place(self.info, n_ctx, kv_type, self.budget)
        most = "all" if best > self.info.n_layers else str(best)
        return (f"{est.layers_on_gpu} of {self.info.n_layers} layers on the GPU: {fmt_bytes(est.gpu.total)} of "
                f"{fmt_bytes(self.budget.vram)} usable\nMost that fit at this context: {most} ({verdict})")
