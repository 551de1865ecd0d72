"""Sweep backends (app.core.bench.sweeps.SweepBackend) over the engine process or a remote server.

Both are blocking: the CLI calls them directly, the Lab page from a worker thread. Cancel is a
threading.Event checked while waiting, so a sweep stops within one repetition.
"""

from __future__ import annotations

import dataclasses
import random
import threading
from typing import Any

from app.core.bench.sweeps import Measurement, Step, SweepCancelled
from app.engine import protocol as P
from app.engine.client import EngineClient, EngineError
from app.engine.remote.backend import RemoteClient

# Words that are a single token in most tokenizers: a remote prompt of N of them is ≈ N tokens.
_WORDS = ("the", "of", "and", "to", "in", "is", "that", "for", "it", "as", "was", "with", "be", "by", "on",
          "not", "he", "this", "are", "or", "his", "from", "at", "which", "but", "have", "an", "had", "they")


class EngineSweepBackend:
    """llama-bench style Bench commands through an EngineClient (no on_event: blocking helpers)."""

    remote = False

    def __init__(self, client: EngineClient, base: P.LoadConfig, cancel: threading.Event | None = None,
                 warmup: bool = True) -> None:
        self.client = client
        self.base = base
        self.cancel = cancel or threading.Event()
        self.warmup = warmup
        self.current: P.LoadConfig | None = None

    def configure(self, config: dict[str, Any]) -> None:
        cfg = dataclasses.replace(self.base, **config)
        if cfg != self.current:
            self.client.load(cfg)  # a reload per configuration: n_ubatch, threads and KV type are load-time
            self.current = cfg

    def measure(self, step: Step, repetitions: int) -> Measurement:
        if self.current is None:
            self.configure({})
        rid = self.client.new_request_id("sweep")
        self.client.send(P.Bench(request_id=rid, n_prompt=step.n_prompt, n_gen=step.n_gen, n_depth=step.n_depth,
                                 repetitions=repetitions, warmup=self.warmup))
        sent_cancel = False
        while True:
            if self.cancel.is_set() and not sent_cancel:
                self.client.send(P.Cancel(rid))
                sent_cancel = True
            try:
                event = self.client.next_event(0.2)
            except EngineError as exc:
                if exc.error.kind == "timeout":
                    continue
                raise
            if isinstance(event, P.BenchResult) and event.request_id == rid:
                if sent_cancel:
                    raise SweepCancelled()
                return Measurement(step, list(event.samples_ns), dict(event.model_info))
            if isinstance(event, P.Error):
                if event.request_id == rid and event.kind == "cancelled":
                    raise SweepCancelled()
                raise EngineError(event)

    def describe(self) -> dict[str, Any]:
        ready = self.client.ready
        loaded = self.client.loaded
        return {"backend": "GPU" if ready and ready.gpu_offload and self.base.n_gpu_layers else "CPU",
                "build": f"llama-cpp-python {ready.llama_cpp_version}" if ready else "",
                "model": loaded.model_desc if loaded else "", "model_path": self.base.model_path,
                "timing": "llama-bench style, engine wall clock per test"}


class RemoteSweepBackend:
    """Timed Generate requests against an OpenAI-compatible server: one request per cell gives both phases
    (TTFT ≈ prefill + network, chunk arrivals ≈ decode). Prompts are random common words (≈ 1 token each)
    and differ per request, so the server's prompt cache cannot hide the prefill."""

    remote = True

    def __init__(self, client: RemoteClient, cancel: threading.Event | None = None, warmup: bool = True) -> None:
        self.client = client
        self.cancel = cancel or threading.Event()
        self.warmup = warmup
        self.rng = random.Random(1234)

    def configure(self, config: dict[str, Any]) -> None:
        if config:
            raise ValueError("a remote server's load settings cannot be changed from here")

    def _one(self, n_prompt: int, n_gen: int) -> tuple[int, int, int]:
        words = " ".join(self.rng.choice(_WORDS) for _ in range(max(1, n_prompt - 1)))
        req = P.Generate(request_id=self.client.new_request_id("sweep"), prompt=words,
                         sampling=P.Sampling(temperature=0.0, max_tokens=n_gen, ignore_eos=True, seed=1))
        done = None
        for event in self.client.generate(req):
            if self.cancel.is_set():
                self.client.send(P.Cancel(req.request_id))
            if isinstance(event, P.Done):
                done = event
        if done is None or done.finish_reason == "cancelled" or self.cancel.is_set():
            raise SweepCancelled()
        m = done.metrics
        return int(m["ttft_ms"] * 1e6), int(m["decode_wall_ms"] * 1e6), max(0, int(m.get("chunks", 0)) - 1)

    def measure(self, step: Step, repetitions: int) -> Measurement:
        if self.warmup:
            self._one(min(step.n_prompt, 16), 4)
        pre: list[int] = []
        dec: list[int] = []
        tokens = 0
        for _ in range(repetitions):
            if self.cancel.is_set():
                raise SweepCancelled()
            p, d, n = self._one(step.n_prompt, step.n_gen)
            pre.append(p)
            dec.append(d)
            tokens = n
        info = {"model_filename": self.client.url, "model_type": self.client.model or "remote",
                "prefill_samples_ns": pre, "decode_tokens": tokens, "n_threads": 0}
        # The decode samples cover the gaps between the first and the last chunk: n_gen - 1 tokens.
        return Measurement(step, dec, info, tokens=tokens)

    def describe(self) -> dict[str, Any]:
        return {"backend": "remote", "build": "", "model": self.client.model or "", "model_path": self.client.url,
                "timing": "client-side wall clock (includes the network)"}

