"""A stand-in for the engine process behind EngineQt: no model, no subprocess; tests push events by hand."""

from __future__ import annotations

import itertools
from typing import Any

from app.engine import protocol as P
from app.ui.engine_link.engine_qt import EngineQt


class FakeClient:
    def __init__(self, on_event: Any = None, **_: Any):
        self.on_event = on_event
        self.alive = False
        self.pid = 4242
        self.sent: list[Any] = []
        self._ids = itertools.count(1)

    def start(self) -> None:
        self.alive = True

    def send(self, command: Any) -> None:
        self.sent.append(command)

    def close(self, timeout: float = 2.0) -> None:
        self.alive = False

    def kill(self) -> None:
        self.alive = False

    def new_request_id(self, prefix: str = "chat") -> str:
        return f"{prefix}-{next(self._ids)}"


def loaded_event(model_desc: str = "fake model", template: str = "chatml") -> P.Loaded:
    return P.Loaded(model_path="/models/fake-Q4_K_M.gguf", load_ms=1.0, n_ctx=512, n_ctx_train=2048, n_vocab=100,
                    n_params=1_000_000, model_size=1_000_000, architecture="llama", model_desc=model_desc,
                    chat_template_name=template, chat_template_source="gguf", n_gpu_layers=0, type_k="f16",
                    type_v="f16", flash_attn=None, swa_full=False, buffers_mib={}, kv_bytes_allocated=0,
                    kv_cells_allocated=512, n_threads=1, n_threads_batch=1, rss_bytes=0)


def fake_engine(**loaded: Any) -> EngineQt:
    """An EngineQt on a FakeClient, started and with a model "loaded"."""
    engine = EngineQt(client_factory=FakeClient)
    engine.start()
    engine._dispatch(loaded_event(**loaded))
    return engine


def gemma_loaded(**kw: Any) -> P.Loaded:
    """The Loaded event of the default model's shape (Gemma 3 270M, 4096-token context), `kw` overriding."""
    base: dict[str, Any] = {
        "model_path": "/m/x-Q4_K_M.gguf", "load_ms": 500.0, "n_ctx": 4096, "n_ctx_train": 32768,
        "n_vocab": 262144, "n_params": 268_000_000, "model_size": 250_000_000, "architecture": "gemma3",
        "model_desc": "gemma3 270M", "chat_template_name": "gemma", "chat_template_source": "architecture",
        "n_gpu_layers": 0, "type_k": "f16", "type_v": "f16", "flash_attn": None, "swa_full": True,
        "buffers_mib": {}, "kv_bytes_allocated": 72 << 20, "kv_cells_allocated": 4096, "n_threads": 2,
        "n_threads_batch": 2, "rss_bytes": 400 << 20, "metadata": {"gemma3.attention.sliding_window": "512"}}
    base.update(kw)
    return P.Loaded(**base)
