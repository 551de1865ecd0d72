"""What the app shows where a context size is chosen (a model's Library details, the context field of Settings
and of a preset): the predicted decode speed as the context fills (`app.core.predict.depth`), the speeds the
user's own chats measured at their depths, and whether the chats ever came near the chosen context
(`app.core.predict.context_use`).

The rates are this machine's from what is stored (the cached bandwidth probe, a `roofline calibrate` result),
never a new measurement: a dialog opening must not run a benchmark.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from app.core.gguf.facts import GGUFInfo
from app.core.predict.context_use import beyond_trained, context_advice
from app.core.predict.depth import DepthPoint, depth_curve, depth_summary, fmt_tokens, fmt_tps
from app.core.predict.memory import MemoryConfig
from app.core.predict.speed import Rates


@dataclass
class ContextView:
    curve: list[DepthPoint]
    measured: list[tuple[float, float]] = field(default_factory=list)  # (depth, decode tok/s) from the chats
    summary: str = ""  # the predicted curve in one line
    measured_line: str = ""
    advice: str = ""  # "your chats with this model reached …" ("" when nothing to say)
    calibrated: bool = False
    trained: str = ""  # "… is above what the model was trained for …" ("" when it is not)

    def lines(self) -> list[str]:
        return [x for x in (self.trained, self.summary, self.measured_line, self.advice) if x]

    def text(self) -> str:
        return "\n".join(self.lines())


def measured_line(points: list[tuple[float, float]]) -> str:
    """"your chats measured 29 tok/s at 1k … 24 tok/s at 6k (12 replies)" ("" without points)."""
    if not points:
        return ""
    pts = sorted(points)
    first, last = pts[0], pts[-1]
    span = f"{fmt_tps(first[1])} tok/s at {fmt_tokens(first[0])}"
    if len(pts) > 1 and last[0] > first[0]:
        span += f" … {fmt_tps(last[1])} tok/s at {fmt_tokens(last[0])}"
    return f"your chats measured {span} ({len(pts)} repl{'y' if len(pts) == 1 else 'ies'})"


def context_view(info: GGUFInfo, rates: Rates, cfg: MemoryConfig, measured: list[tuple[float, float]] | None = None,
                 reached: int = 0, replies: int = 0, has_gpu: bool = True) -> ContextView:
    curve = depth_curve(info, rates, cfg)
    advice = context_advice(info, cfg, reached, replies, has_gpu=has_gpu)
    label = "" if rates.cpu.calibrated else " (uncalibrated)"
    return ContextView(curve=curve, measured=list(measured or []), summary=depth_summary(info, rates, cfg) + label,
                       measured_line=measured_line(list(measured or [])), advice=advice.line if advice else "",
                       calibrated=bool(rates.cpu.calibrated), trained=beyond_trained(cfg.n_ctx, info.n_ctx_train))


def stored_machine_rates(threads: int | None = None) -> Rates:
    """This machine's rates from what is stored: the cached bandwidth probe (an assumed bandwidth without one)
    and a `roofline calibrate` result for `threads`."""
    from app.core.predict.bandwidth import load_cached
    from app.core.predict.calibration import calibrated_rates
    from app.core.predict.hardware import probe_hardware
    from app.core.predict.speed import default_rates

    hw = probe_hardware()
    return calibrated_rates(default_rates(hw, load_cached(hw.machine_key), threads=threads), hw.machine_key,
                            "cpu", "gpu")


def memory_config(values: dict[str, object], n_ctx: int | None = None) -> MemoryConfig:
    """The memory config of a load plan's values (`app.core.predict.load_plan`), its context replaced by
    `n_ctx` when given (a field being edited)."""
    def num(key: str, default: int) -> int:
        v = values.get(key)
        return v if isinstance(v, int) and not isinstance(v, bool) else default

    type_k, type_v = str(values.get("type_k") or "f16"), str(values.get("type_v") or "f16")
    flash = values.get("flash_attn")
    return MemoryConfig(n_ctx=n_ctx if n_ctx is not None else num("n_ctx", 4096), type_k=type_k, type_v=type_v,
                        flash_attn=flash if isinstance(flash, bool) else None, n_gpu_layers=num("n_gpu_layers", 0),
                        n_batch=num("n_batch", 512), n_ubatch=num("n_ubatch", 512), n_cpu_moe=num("n_cpu_moe", 0))


def view_for_model(model_path: str, measured: list[tuple[float, float]], reached: int, replies: int,
                   n_ctx: int | None = None, values: dict[str, object] | None = None) -> ContextView:
    """The view of a local model as the app would load it (settings, preset, tune result: `plan_load`, or
    `values` given), at `n_ctx` when given; reads the header and the stored rates (slow-ish: off the GUI
    thread)."""
    from app.core.gguf.info import inspect_gguf

    if values is None:
        from app.core.config.settings import load_settings
        from app.core.predict.load_plan import plan_load

        values = plan_load(model_path, load_settings(move_aside=False).settings).values
    info = inspect_gguf(model_path)
    threads = values.get("n_threads")
    rates = stored_machine_rates(threads if isinstance(threads, int) else None)
    cfg = memory_config(values, n_ctx)
    if rates.gpu is None:
        cfg.n_gpu_layers = 0
    return context_view(info, rates, cfg, measured, reached, replies, has_gpu=rates.gpu is not None)
