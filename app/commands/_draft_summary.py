"""The speculative-decoding lines of `roofline chat`'s summary: the measured speed-up, and for a draft model
the speed-up the speed model predicts from the two models' bytes per token at the acceptance just measured.

The machine's rates come from the cached bandwidth measurement and stored calibrations only: a summary never
starts a measurement (without one the prediction uses the assumed bandwidth and says it is uncalibrated)."""

from __future__ import annotations

from pathlib import Path
from typing import Any


def measured_acceptance(metrics: dict[str, Any]) -> tuple[float, float] | None:
    """(per-token acceptance α, mean draft length) behind a run's counters; None without drafted batches."""
    from app.core.predict.speculative_speedup import acceptance_from_rate

    drafted, accepted = int(metrics.get("draft_tokens") or 0), int(metrics.get("draft_accepted") or 0)
    steps = int(metrics.get("lookup_batch_steps") or 0)
    if drafted <= 0 or steps <= 0:
        return None
    k = drafted / steps
    return acceptance_from_rate(accepted / drafted, k), k


def this_machines_rates() -> Any:
    from app.core.predict.bandwidth import load_cached
    from app.core.predict.calibration import calibrated_rates
    from app.core.predict.hardware import probe_hardware
    from app.core.predict.speed import default_rates

    hw = probe_hardware()
    return calibrated_rates(default_rates(hw, load_cached(hw.machine_key)), hw.machine_key, "cpu", "gpu")


def speedup_lines(metrics: dict[str, Any], model: Path | None, draft: Path | None, n_ctx: int, kv_type: str,
                  n_gpu_layers: int, rates: Any = None) -> list[str]:
    """'speed-up: measured ×…; predicted ×…' for a run that drafted (nothing when nothing was drafted)."""
    measured = metrics.get("lookup_speedup")
    if not metrics.get("draft_tokens"):
        return []
    line = "speed-up: measured " + (f"×{measured:.2f} (vs plain decoding steps)" if measured else "n/a")
    seen = measured_acceptance(metrics)
    if model is None or draft is None or seen is None:
        return [line]
    from app.core.gguf.info import GGUFError, inspect_gguf
    from app.core.predict.memory import MemoryConfig
    from app.core.predict.speculative_speedup import predict_speedup

    alpha, k = seen
    try:
        target_info, draft_info = inspect_gguf(model), inspect_gguf(draft)
    except (GGUFError, OSError) as exc:
        return [line + f"; no prediction ({exc})"]
    rates = rates if rates is not None else this_machines_rates()
    depth = int(metrics.get("prompt_tokens") or 0) + int(metrics.get("generated_tokens") or 0) // 2
    cfg = MemoryConfig(n_ctx=n_ctx, type_k=kv_type, type_v=kv_type, n_gpu_layers=n_gpu_layers)
    p = predict_speedup(target_info, draft_info, rates, alpha, k, cfg, depth=depth)
    label = "calibrated" if rates.cpu.calibrated else "uncalibrated"
    return [line + f"; predicted ×{p.speedup:.2f} at the acceptance seen (≈{100 * alpha:.0f} % a token, "
            f"{k:.1f} drafted a step) from the two models' bytes per token ({label})"]
