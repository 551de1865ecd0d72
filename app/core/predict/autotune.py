"""Auto-tune threads and n_ubatch for this machine and model, and remember the choice.

A short coordinate search through a sweep backend (app.core.bench.sweeps.SweepBackend): first the thread count
(decode threads judged on tg, batch threads on pp, n_ubatch at llama.cpp's 512), then n_ubatch with the
chosen batch threads; each phase in interleaved rounds, judged by the fastest repetition. Configurations are
compared by the time of a reference request (512-token prompt, 128-token answer), so neither phase is
optimised at the other's expense. The choice is stored in cache_dir()/autotune.json keyed by machine and
model; `tuned_config(model_path)` returns it (or None) for the chat to use when the thread setting is "auto".
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from app.core.bench.sweeps import Measurement, Step, SweepBackend, SweepCancelled
from app.core.config.paths import cache_dir
from app.core.files import atomic_write
from app.core.predict.machine_identity import tuning_machine

REF_PROMPT, REF_GEN = 512, 128  # the reference request used to compare configurations
UBATCHES = (64, 128, 256, 512)
TUNE_PP, TUNE_TG = 512, 16  # pp as long as the largest n_ubatch tried, or n_ubatch cannot matter
STORE_VERSION = 1


@dataclass
class Candidate:
    n_threads: int
    n_threads_batch: int
    n_ubatch: int
    prefill_tps: float = 0.0
    decode_tps: float = 0.0

    @property
    def config(self) -> dict[str, int]:
        return {"n_threads": self.n_threads, "n_threads_batch": self.n_threads_batch,
                "n_ubatch": self.n_ubatch, "n_batch": max(512, self.n_ubatch)}

    @property
    def reference_ms(self) -> float:
        """Time of the reference request (prefill + decode) at the measured rates."""
        if self.prefill_tps <= 0 or self.decode_tps <= 0:
            return float("inf")
        return 1000.0 * (REF_PROMPT / self.prefill_tps + REF_GEN / self.decode_tps)


@dataclass
class TuneResult:
    best: Candidate
    tried: list[Candidate] = field(default_factory=list)
    cancelled: bool = False

    @property
    def finding(self) -> str:
        b = self.best
        return (f"Use {b.n_threads} decode thread(s), {b.n_threads_batch} batch thread(s) and n_ubatch "
                f"{b.n_ubatch}: prefill {b.prefill_tps:,.0f} tok/s, decode {b.decode_tps:.1f} tok/s "
                f"({len(self.tried)} configurations measured).")


def thread_candidates(n_logical: int | None = None, n_physical: int | None = None) -> list[int]:
    """1, powers of two, the physical and the logical core count (llama.cpp scales unevenly past cores)."""
    n_logical = max(1, n_logical or os.cpu_count() or 1)
    n_physical = max(1, min(n_logical, n_physical or n_logical))
    out = {1, n_physical, n_logical}
    p = 2
    while p < n_logical:
        out.add(p)
        p *= 2
    return sorted(out)


def best_rate(m: Measurement) -> float:
    """Tokens per second of the fastest repetition: other load on the machine only ever slows a run down,
    so the fastest one is the best estimate of what the configuration can do."""
    n = m.step.n_prompt + m.step.n_gen
    return n / (min(m.samples_ns) / 1e9) if m.samples_ns and min(m.samples_ns) > 0 else 0.0


def _measure(backend: SweepBackend, cand: Candidate, reps: int, pp: bool = True, tg: bool = True) -> None:
    """Measure and keep the best rate seen for this candidate (candidates are measured in several rounds)."""
    backend.configure(cand.config)
    if pp:
        cand.prefill_tps = max(cand.prefill_tps, best_rate(backend.measure(Step(TUNE_PP, 0), reps)))
    if tg:
        cand.decode_tps = max(cand.decode_tps, best_rate(backend.measure(Step(0, TUNE_TG), reps)))


def autotune(backend: SweepBackend, threads: list[int] | None = None, ubatches: tuple[int, ...] = UBATCHES,
             repetitions: int = 2, rounds: int = 2, progress: Callable[[int, int, str], None] | None = None,
             cancelled: Callable[[], bool] | None = None) -> TuneResult:
    """Short coordinate search, each phase in `rounds` interleaved rounds (order reversed every other
    round) so that a burst of load on the machine cannot pick the winner; returns the best configuration."""
    threads = threads or thread_candidates()
    total = rounds * (len(threads) + len(ubatches))
    done = 0
    phase1 = [Candidate(t, t, 512) for t in threads]
    phase2: list[Candidate] = []

    def step(label: str) -> None:
        nonlocal done
        if cancelled is not None and cancelled():
            raise SweepCancelled()
        if progress is not None:
            progress(done, total, label)
        done += 1

    def interleaved(cands: list[Candidate], label: Callable[[Candidate], str], tg: bool) -> None:
        for r in range(rounds):
            for cand in cands if r % 2 == 0 else cands[::-1]:
                step(label(cand))
                _measure(backend, cand, repetitions, tg=tg)

    try:
        interleaved(phase1, lambda c: f"threads {c.n_threads}", tg=True)
        t_dec = max(phase1, key=lambda c: c.decode_tps)
        t_pp = max(phase1, key=lambda c: c.prefill_tps)
        # n_ubatch only changes prompt batches: decode keeps the rate measured for the decode threads
        phase2 = [Candidate(t_dec.n_threads, t_pp.n_threads, u, decode_tps=t_dec.decode_tps) for u in ubatches]
        interleaved(phase2, lambda c: f"n_ubatch {c.n_ubatch}", tg=False)
    except SweepCancelled:
        tried = [c for c in phase1 + phase2 if c.prefill_tps > 0 and c.decode_tps > 0]
        if not tried:
            raise
        return TuneResult(min(tried, key=lambda c: c.reference_ms), phase1 + phase2, cancelled=True)
    if progress is not None:
        progress(total, total, "done")
    return TuneResult(min(phase2, key=lambda c: c.reference_ms), phase1 + phase2)


# ------------------------------------------------------------------------------------------ storage
def model_key(model_path: str | Path) -> str:
    p = Path(model_path)
    try:
        size = p.stat().st_size
    except OSError:
        size = 0
    return f"{p.name}:{size}"


def store_path() -> Path:
    return cache_dir() / "autotune.json"


def _read() -> dict[str, Any]:
    try:
        data = json.loads(store_path().read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {"version": STORE_VERSION, "entries": {}}
    if not isinstance(data, dict) or data.get("version") != STORE_VERSION or not isinstance(data.get("entries"), dict):
        return {"version": STORE_VERSION, "entries": {}}
    return data


def save_tuned(model_path: str | Path, result: TuneResult) -> None:
    data = _read()
    b = result.best
    data["entries"][f"{tuning_machine()}|{model_key(model_path)}"] = {
        "config": b.config, "prefill_tps": b.prefill_tps, "decode_tps": b.decode_tps,
        "finding": result.finding, "time": time.strftime("%Y-%m-%dT%H:%M:%S"),
        "tried": [{**c.config, "prefill_tps": c.prefill_tps, "decode_tps": c.decode_tps} for c in result.tried],
    }
    atomic_write.write_json(store_path(), data)


def tuned_entry(model_path: str | Path) -> dict[str, Any] | None:
    entry = _read()["entries"].get(f"{tuning_machine()}|{model_key(model_path)}")
    return entry if isinstance(entry, dict) else None


def tuned_config(model_path: str | Path) -> dict[str, int] | None:
    """{"n_threads", "n_threads_batch", "n_ubatch", "n_batch"} tuned for this machine and model, or None."""
    entry = tuned_entry(model_path)
    if entry is None:
        return None
    cfg = entry.get("config")
    keys = ("n_threads", "n_threads_batch", "n_ubatch", "n_batch")
    if not isinstance(cfg, dict) or not all(isinstance(cfg.get(k), int) and cfg[k] > 0 for k in keys):
        return None
    return {k: int(cfg[k]) for k in keys}


def forget_tuned(model_path: str | Path) -> bool:
    data = _read()
    key = f"{tuning_machine()}|{model_key(model_path)}"
    if key not in data["entries"]:
        return False
    del data["entries"][key]
    atomic_write.write_json(store_path(), data)
    return True
