"""The line under a context-size field (Settings, a model's preset): the predicted decode speed as that context
fills, the user's chats' measured speeds, and whether those chats came near it (`app.core.predict.context_view`).

The model's header and this machine's stored rates are read once, when the dialog opens (no measurement);
each change of the field is then a few speed predictions (tens of ms).
"""

from __future__ import annotations

from typing import Any


class ContextSpeed:
    def __init__(self, model_path: str | None, usage: Any = None):
        self.info: Any = None
        self.usage = usage
        self._rates: dict[int | None, Any] = {}
        if not model_path:
            return
        from app.core.gguf.info import GGUFError, inspect_gguf

        try:
            info = inspect_gguf(model_path)
        except (GGUFError, OSError):
            return
        self.info = info if info.n_layers else None

    def _rates_for(self, threads: int | None) -> Any:
        if threads not in self._rates:
            from app.core.predict.context_view import stored_machine_rates

            self._rates[threads] = stored_machine_rates(threads)
        return self._rates[threads]

    def text(self, n_ctx: int, kv_type: str | None = None, n_gpu_layers: int | None = None,
             threads: int | None = None) -> str:
        """The view's lines for this context ("" without a usable local model)."""
        if self.info is None or n_ctx <= 0:
            return ""
        from app.core.predict.context_view import context_view, memory_config

        rates = self._rates_for(threads or None)
        kv = kv_type or "f16"
        values = {"type_k": kv, "type_v": kv, "n_gpu_layers": -1 if n_gpu_layers is None else n_gpu_layers}
        cfg = memory_config(values, n_ctx)
        if rates.gpu is None:
            cfg.n_gpu_layers = 0
        points = [(p.depth, p.decode_tps) for p in getattr(self.usage, "points", [])]
        try:
            view = context_view(self.info, rates, cfg, points, getattr(self.usage, "max_tokens", 0),
                                getattr(self.usage, "replies", 0), has_gpu=rates.gpu is not None)
        except ValueError as exc:  # a configuration the models refuse (a quantized V cache without flash)
            return str(exc)
        return view.text()
