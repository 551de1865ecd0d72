"""One way from the settings to a model load: the CLI and the window both ask `plan_load` what to load with.

Four layers, each winning over the one before, for the model file being loaded:

1. settings.json (and `ROOFLINE_*` variables; a value nobody set is the built-in default, source "default"),
2. the model's preset (app.core.models.presets), values it sets,
3. the auto-tune result for this model on this machine (`roofline tune`: threads, batch threads, n_ubatch),
   used only while the threads are still "auto" after 1 and 2 — a thread count someone chose is kept,
4. command-line flags, the ones given.

The result is the engine's load options (LoadConfig's field names) and the generation options (sampling,
system prompt, context-overflow policy), with the layer each value came from, for the CLI summary
("ctx 8192 (preset)"). A layer that cannot be read is skipped with a note; a missing one is skipped silently.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from app.core.config.settings import SamplingDefaults, Settings
from app.core.models.presets import preset_for, preset_key

DEFAULT, SETTINGS, PRESET, TUNE, FLAG = "default", "settings", "preset", "tune", "flag"

# The engine's LoadConfig keyword arguments this module decides.
LOAD_KEYS = ("n_ctx", "n_gpu_layers", "n_cpu_moe", "type_k", "type_v", "n_threads", "n_threads_batch", "n_batch",
             "n_ubatch", "flash_attn", "chat_template")
SAMPLING_KEYS = tuple(SamplingDefaults.model_fields)  # temperature, top_p, top_k, min_p, repeat_penalty, ...
GENERATION_KEYS = (*SAMPLING_KEYS, "system_prompt", "context_overflow")

# Built-in default (what a fresh Settings says) -> settings value -> plan keys it feeds.
_SETTINGS_FIELDS: dict[str, tuple[str, ...]] = {
    "n_ctx": ("n_ctx",), "n_gpu_layers": ("n_gpu_layers",), "n_cpu_moe": ("n_cpu_moe",),
    "kv_cache_type": ("type_k", "type_v"),
    "threads": ("n_threads", "n_threads_batch"), "flash_attn": ("flash_attn",), "n_batch": ("n_batch",),
    "n_ubatch": ("n_ubatch",), "context_overflow": ("context_overflow",),
}
# The preset's fields feeding the plan (sampling apart).
_PRESET_FIELDS: dict[str, tuple[str, ...]] = {
    "n_ctx": ("n_ctx",), "n_gpu_layers": ("n_gpu_layers",), "n_cpu_moe": ("n_cpu_moe",),
    "kv_cache_type": ("type_k", "type_v"),
    "threads": ("n_threads", "n_threads_batch"), "flash_attn": ("flash_attn",), "system_prompt": ("system_prompt",),
    "chat_template": ("chat_template",), "context_overflow": ("context_overflow",),
}

TunedLookup = Callable[[str | Path], "dict[str, int] | None"]


@dataclass
class LoadPlan:
    model_path: str
    values: dict[str, Any]
    sources: dict[str, str]
    notes: list[str] = field(default_factory=list)
    preset: str | None = None  # the preset's key when one applied

    def load_kwargs(self) -> dict[str, Any]:
        """Keyword arguments for the engine's LoadConfig (model_path apart)."""
        return {**{key: self.values[key] for key in LOAD_KEYS}, "gpu_expected": self.gpu_expected()}

    def gpu_expected(self, drivers_report_gpu: Callable[[], bool] | None = None) -> bool:
        """Should this load run on a GPU: GPU layers were set, or a driver here reports a GPU (`roofline hw`'s)
        while the layers are on auto. Then a load that places fewer layers on one says so."""
        if self.values["n_gpu_layers"] == 0:
            return False
        if self.gpu_layers_asked:
            return True
        if drivers_report_gpu is None:
            from app.core.predict import gpu_probes

            drivers_report_gpu = gpu_probes.drivers_report_gpu
        return drivers_report_gpu()

    @property
    def gpu_layers_asked(self) -> bool:
        """The settings, the preset or a flag set GPU layers (not the auto default, not 0)."""
        return self.sources["n_gpu_layers"] != DEFAULT and self.values["n_gpu_layers"] != 0

    def sampling_kwargs(self) -> dict[str, Any]:
        """Keyword arguments for the engine's Sampling; a seed of -1 (a preset's "random") becomes None."""
        out = {key: self.values[key] for key in SAMPLING_KEYS}
        if out["seed"] is not None and out["seed"] < 0:
            out["seed"] = None
        return out

    def sampling_defaults(self) -> SamplingDefaults:
        return SamplingDefaults(**self.sampling_kwargs())

    def shown(self, key: str, label: str | None = None, value: Any = None) -> str:
        """`label value (source)`, e.g. "ctx 8192 (preset)"."""
        value = self.values[key] if value is None else value
        return f"{label or key} {value} ({self.sources[key]})"

    def summary_lines(self) -> list[str]:
        v = self.values
        gpu = "all" if v["n_gpu_layers"] == -1 else v["n_gpu_layers"]
        threads = "auto" if v["n_threads"] is None else f"{v['n_threads']}/{v['n_threads_batch']}"
        flash = {None: "auto", True: "on", False: "off"}[v["flash_attn"]]
        load = [self.shown("n_ctx", "ctx"), self.shown("type_k", "kv"), self.shown("n_gpu_layers", "gpu layers", gpu),
                *([self.shown("n_cpu_moe", "experts in RAM for blocks <")] if v["n_cpu_moe"] else []),
                self.shown("n_threads", "threads", threads), self.shown("n_ubatch", "ubatch"),
                self.shown("n_batch", "batch"), self.shown("flash_attn", "flash attn", flash)]
        seed = "random" if v["seed"] is None or v["seed"] < 0 else v["seed"]
        gen = [self.shown("temperature", "temp"), self.shown("top_p", "top-p"), self.shown("top_k", "top-k"),
               self.shown("min_p", "min-p"), self.shown("repeat_penalty", "repeat"), self.shown("max_tokens", "n"),
               self.shown("seed", "seed", seed), self.shown("context_overflow", "overflow")]
        lines = ["load    : " + ", ".join(load), "sampling: " + ", ".join(gen)]
        if v["system_prompt"] is not None and self.sources["system_prompt"] != DEFAULT:
            lines.append(f"system  : {len(v['system_prompt'])} chars ({self.sources['system_prompt']})")
        if v["chat_template"] is not None:
            lines.append(f"template: override ({self.sources['chat_template']})")
        if self.preset:
            lines.append(f"preset  : {self.preset}")
        lines += [f"note    : {note}" for note in self.notes]
        return lines


def _read_tuned(model_path: str | Path) -> dict[str, int] | None:
    from app.core.predict.autotune import tuned_config

    return tuned_config(model_path)


def plan_load(model_path: str | Path | None, settings: Settings, flags: dict[str, Any] | None = None,
              tuned: TunedLookup = _read_tuned) -> LoadPlan:
    """Merge settings, the model's preset, the tune result and `flags` (plan keys, None: not given).
    No model path (a remote server): no preset and no tune result, the rest as usual."""
    values: dict[str, Any] = {}
    sources: dict[str, str] = {}
    notes: list[str] = []

    def put(keys: tuple[str, ...], value: Any, source: str) -> None:
        for key in keys:
            values[key] = value
            sources[key] = source

    # 1. settings.json: "settings" for what the file or an environment variable set, "default" for the rest
    for name, keys in _SETTINGS_FIELDS.items():
        value = getattr(settings, name)
        if name == "n_gpu_layers" and value is None:  # auto, written to the file or not: the default
            put(keys, -1, DEFAULT)  # every layer when the build can offload (none otherwise)
            continue
        put(keys, value, SETTINGS if name in settings.model_fields_set else DEFAULT)
    sampling_set = settings.sampling.model_fields_set if "sampling" in settings.model_fields_set else set()
    for name in SAMPLING_KEYS:
        put((name,), getattr(settings.sampling, name), SETTINGS if name in sampling_set else DEFAULT)
    put(("system_prompt",), None, DEFAULT)
    put(("chat_template",), None, DEFAULT)

    # 2. the model's preset
    preset = preset_for(settings, model_path) if model_path is not None else None
    if preset is not None:
        for name, keys in _PRESET_FIELDS.items():
            value = getattr(preset, name)
            if value is not None:
                put(keys, value, PRESET)
        for name, value in preset.sampling.model_dump(exclude_none=True).items():
            put((name,), value, PRESET)

    # 3. the auto-tune result, while threads are still "auto"
    try:
        tune = tuned(model_path) if model_path is not None else None
    except (OSError, ValueError) as exc:
        tune = None
        notes.append(f"the auto-tune result could not be read ({exc}); not used")
    if tune is not None:
        if values["n_threads"] is None:
            put(("n_threads",), tune["n_threads"], TUNE)
            put(("n_threads_batch",), tune["n_threads_batch"], TUNE)
            put(("n_ubatch",), tune["n_ubatch"], TUNE)
            put(("n_batch",), max(tune["n_batch"], tune["n_ubatch"]), TUNE)
        else:
            notes.append(f"auto-tune result not used: threads set in the {sources['n_threads']}")

    # 4. command-line flags
    for key, value in (flags or {}).items():
        if value is None:
            continue
        if key not in values:
            raise KeyError(f"unknown load/generation option {key!r}")
        put((key,), value, FLAG)

    if values["n_ubatch"] > values["n_batch"]:  # llama.cpp clamps it anyway; say the value that is used
        put(("n_ubatch",), values["n_batch"], sources["n_batch"])
    shown_key = preset_key(model_path) if preset is not None and model_path is not None else None
    return LoadPlan(str(model_path or ""), values, sources, notes, shown_key)


def planned_threads(model_path: str | Path | None, settings: Settings | None = None,
                    n_threads: int | None = None) -> tuple[int | None, int | None]:
    """(n_threads, n_threads_batch) a load of `model_path` will use — settings, preset, tune result, then an
    explicit `n_threads` — so predictions are for the threads the engine gets (None: llama.cpp's default)."""
    if settings is None:
        from app.core.config.settings import load_settings

        settings = load_settings(move_aside=False).settings  # predicting never moves the user's file aside
    plan = plan_load(model_path, settings, {"n_threads": n_threads, "n_threads_batch": n_threads})
    return plan.values["n_threads"], plan.values["n_threads_batch"]
