"""Per-model presets: which preset belongs to a model file, and reading/writing one in the settings.

A preset is keyed by the file's name and size (`Qwen3-8B-Q4_K_M.gguf:5027783488`), the same identity the
auto-tune results use (app.core.predict.autotune.model_key). Why not a hash of the file or of its GGUF header:
choosing a model must stay instant, and hashing a multi-GB file is not; a header hash needs the header read
(megabytes for big vocabularies) and would differ between two files that hold the same weights. The name
and size survive moving the file to another folder, and a re-download or re-quantization under the same
name almost always changes the size, so a stale preset is not applied to a different file.
"""

from __future__ import annotations

from pathlib import Path

from app.core.config.settings import ModelPreset, Settings
from app.core.predict.autotune import model_key


def preset_key(model_path: str | Path) -> str:
    return model_key(model_path)


def preset_for(settings: Settings, model_path: str | Path) -> ModelPreset | None:
    return settings.presets.get(preset_key(model_path))


def set_preset(settings: Settings, model_path: str | Path, preset: ModelPreset | None) -> Settings:
    """The settings with this model's preset replaced (None: removed); the caller saves them."""
    presets = dict(settings.presets)
    key = preset_key(model_path)
    if preset is None:
        presets.pop(key, None)
    else:
        presets[key] = preset.model_copy(update={"model_name": Path(model_path).name})
    settings.presets = presets  # one assignment: validate_assignment checks the whole dict
    return settings


def describe(preset: ModelPreset) -> list[str]:
    """The values a preset sets, as `name value` strings (for the CLI and the dialog)."""
    out = []
    for name in ("n_ctx", "n_gpu_layers", "n_cpu_moe", "kv_cache_type", "threads", "flash_attn", "context_overflow"):
        value = getattr(preset, name)
        if value is not None:
            out.append(f"{name} {value}")
    for name, value in preset.sampling.model_dump(exclude_none=True).items():
        out.append(f"{name} {value}")
    if preset.system_prompt is not None:
        out.append(f"system prompt ({len(preset.system_prompt)} chars)")
    if preset.chat_template is not None:
        out.append("chat template override")
    return out
