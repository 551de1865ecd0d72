"""User settings: one JSON file in the config dir, validated by pydantic-settings, `ROOFLINE_*` env overrides.

Loading never fails: a file that is not JSON, does not validate, or was written by a newer Roofline is
moved aside as `settings.json.bak-<timestamp>` (nothing is lost) and the defaults are used, with a warning
the UI shows. Environment variables (`ROOFLINE_N_CTX=8192`, nested: `ROOFLINE_SAMPLING__TEMPERATURE=0.2`)
win over the file for this run but are never written back into it.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, Literal

from pydantic import BaseModel, Field, ValidationError, field_validator
from pydantic_settings import BaseSettings, PydanticBaseSettingsSource, SettingsConfigDict

from app.core.config import paths
from app.core.config.defaults import DEFAULT_N_CTX, OverflowPolicy
from app.core.files import atomic_write
from app.core.files.aside import aside_name
from app.core.gguf.kv_types import DEFAULT_KV_TYPE, KvType
from app.core.remote.roof_entry import RemoteServerRoofs
from app.core.sampling import defaults as D

SETTINGS_VERSION = 1
SETTINGS_FILENAME = "settings.json"
# llama.cpp's CPU thread pool holds at most 512 threads (GGML_MAX_N_THREADS), and each one reserves a stack
# inside the engine's address-space limit: 1024 died with "libgomp: Thread creation failed". Past the cores a
# machine has, more threads only wait on each other; 256 leaves room for the largest machines. A fixed bound,
# not one from this machine's cores: a settings file valid on one machine must not be moved aside on another.
MAX_THREADS = 256



class SamplingDefaults(BaseModel):
    temperature: float = Field(default=D.TEMPERATURE, ge=0.0, le=5.0)
    top_p: float = Field(default=D.TOP_P, ge=0.0, le=1.0)
    top_k: int = Field(default=D.TOP_K, ge=0)
    min_p: float = Field(default=D.MIN_P, ge=0.0, le=1.0)
    repeat_penalty: float = Field(default=D.REPEAT_PENALTY, ge=0.0, le=5.0)
    max_tokens: int = Field(default=D.MAX_TOKENS, ge=1, le=1_000_000)
    seed: int | None = None  # None: random each time


class PresetSampling(BaseModel):
    """A preset's sampling: only the values it sets (None: not set, the settings' value applies)."""

    temperature: float | None = Field(default=None, ge=0.0, le=5.0)
    top_p: float | None = Field(default=None, ge=0.0, le=1.0)
    top_k: int | None = Field(default=None, ge=0)
    min_p: float | None = Field(default=None, ge=0.0, le=1.0)
    repeat_penalty: float | None = Field(default=None, ge=0.0, le=5.0)
    max_tokens: int | None = Field(default=None, ge=1, le=1_000_000)
    seed: int | None = Field(default=None, ge=-1)  # -1: a random seed each time, whatever the settings say


class ModelPreset(BaseModel):
    """Settings for one model file (app.core.models.presets keys them); None everywhere means "not set here"."""

    model_name: str = ""  # the file name, shown in lists (the key also holds the size)
    n_ctx: int | None = Field(default=None, ge=256, le=1 << 21)
    n_gpu_layers: int | None = Field(default=None, ge=-1)
    n_cpu_moe: int | None = Field(default=None, ge=0, le=4096)
    kv_cache_type: KvType | None = None
    threads: int | None = Field(default=None, ge=1)
    flash_attn: bool | None = None
    sampling: PresetSampling = Field(default_factory=PresetSampling)
    system_prompt: str | None = None
    chat_template: str | None = Field(default=None, max_length=200_000)  # a built-in name or a Jinja template
    context_overflow: OverflowPolicy | None = None

    @field_validator("threads")
    @classmethod
    def _threads(cls, value: int | None) -> int | None:
        return check_threads(value)


def check_threads(value: int | None) -> int | None:
    """`threads` as settings and presets accept it: None (llama.cpp picks) or 1..MAX_THREADS."""
    if value is not None and value > MAX_THREADS:
        cores = os.cpu_count() or "?"
        raise ValueError(f"at most {MAX_THREADS} threads, got {value} (this machine has {cores} logical "
                         "cores; llama.cpp is fastest with about one thread per physical core)")
    return value


class WindowState(BaseModel):
    geometry: str = ""  # base64 of QWidget.saveGeometry()
    state: str = ""  # base64 of QMainWindow.saveState() (dock layout)
    dashboard_visible: bool = True
    theme: Literal["system", "light", "dark"] = "system"  # View ▸ Theme
    export_dir: str = ""  # the folder the last chat export went to ("": the user's documents)


class Settings(BaseSettings):
    model_config = SettingsConfigDict(
        env_prefix="ROOFLINE_", env_nested_delimiter="__", extra="ignore", validate_assignment=True
    )

    version: int = SETTINGS_VERSION
    models_dir: str | None = None  # None: paths.default_models_dir()
    threads: int | None = Field(default=None, ge=1)  # None: llama.cpp picks (physical cores); <= MAX_THREADS
    n_ctx: int = Field(default=DEFAULT_N_CTX, ge=256, le=1 << 21)
    n_gpu_layers: int | None = Field(default=None, ge=-1)  # None: auto (all layers when the build can offload)
    # MoE models: the expert matrices of the first N blocks stay in RAM (llama.cpp's --n-cpu-moe); 0: none
    n_cpu_moe: int = Field(default=0, ge=0, le=4096)
    kv_cache_type: KvType = DEFAULT_KV_TYPE
    flash_attn: bool | None = None  # None: llama.cpp decides
    n_batch: int = Field(default=512, ge=1, le=1 << 16)
    n_ubatch: int = Field(default=512, ge=1, le=1 << 16)
    last_model: str | None = None
    # The most a hub file's header (metadata + tensor table) may take before it is refused; real ones are 1-10 MiB.
    max_remote_header_mib: int = Field(default=64, ge=1, le=4096)
    # A hub file with no sha256 (no LFS hash, no 64-hex ETag) cannot be checked: refused unless this is on.
    allow_unverified_downloads: bool = False
    context_overflow: OverflowPolicy = "stop"
    # Saved KV caches of chats (app.core.chat.saved_kv): the most their folder may hold; 0: none saved or restored
    saved_kv_budget_mib: int = Field(default=2048, ge=0, le=1 << 24)
    # The most GPU memory Roofline plans a load for (GiB); None: what the device has free, less headroom. For a
    # GPU shared with other work, and for tests that pretend a device is smaller (ROOFLINE_VRAM_BUDGET_GIB=2).
    vram_budget_gib: float | None = Field(default=None, gt=0, le=1 << 20)
    sampling: SamplingDefaults = Field(default_factory=SamplingDefaults)
    window: WindowState = Field(default_factory=WindowState)
    presets: dict[str, ModelPreset] = Field(default_factory=dict)  # key: app.core.models.presets.preset_key
    # Remote servers' GPU roofs as entered in the Connect dialog; key: app.core.remote.roof_entry.server_key
    remote_servers: dict[str, RemoteServerRoofs] = Field(default_factory=dict)
    _read_env: ClassVar[bool] = True  # environment variables override the file (see settings_customise_sources)

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        # The file's values arrive as init kwargs; env vars must win over them (not in _FileOnly).
        return (env_settings, init_settings) if cls._read_env else (init_settings,)

    @field_validator("threads")
    @classmethod
    def _threads(cls, value: int | None) -> int | None:
        return check_threads(value)

    @field_validator("models_dir", "last_model")
    @classmethod
    def _no_nul(cls, value: str | None) -> str | None:
        # A NUL byte makes every later filesystem call raise ValueError (not OSError): refuse it here.
        if value is not None and "\x00" in value:
            raise ValueError("a path cannot contain a NUL byte")
        return value

    def resolved_models_dir(self) -> Path:
        """The models folder these settings choose (paths.models_dir() reads it from the saved settings)."""
        return Path(self.models_dir).expanduser() if self.models_dir else paths.default_models_dir()


class _FileOnly(Settings):
    """The same schema without env vars: what the file itself says (used when saving)."""

    _read_env: ClassVar[bool] = False


@dataclass
class LoadResult:
    settings: Settings
    warning: str | None = None  # shown to the user when the file was unusable
    backup: Path | None = None


def settings_path() -> Path:
    return paths.config_dir() / SETTINGS_FILENAME


def _env_fields() -> set[str]:
    """Top-level fields set by ROOFLINE_* env vars right now."""
    prefix = "roofline_"
    names: set[str] = set()
    for key in os.environ:
        low = key.lower()
        if low.startswith(prefix):
            names.add(low[len(prefix):].split("__", 1)[0])
    return names & set(Settings.model_fields)


def _move_aside(path: Path) -> Path:
    backup = aside_name(path, "bak")
    os.replace(path, backup)
    return backup


def _errors(exc: ValidationError) -> str:
    return "; ".join(f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in exc.errors()[:3])


def _split_presets(data: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any], str | None]:
    """(data without broken preset entries, the broken entries as read, a note naming them). One broken preset
    must not cost the whole file, so it is dropped alone; save_settings writes it back unchanged."""
    presets = data.get("presets")
    if not isinstance(presets, dict):
        return data, {}, None  # not an object at all: the whole file is invalid (moved aside as usual)
    good: dict[str, Any] = {}
    broken: dict[str, Any] = {}
    reasons: list[str] = []
    for key, raw in presets.items():
        try:
            ModelPreset.model_validate(raw)
        except ValidationError as exc:
            broken[key] = raw
            reasons.append(f"{key!r} ({_errors(exc)})")
        else:
            good[key] = raw
    if not broken:
        return data, {}, None
    note = (f"Ignored {len(broken)} invalid model preset(s), kept in the file unchanged: "
            + "; ".join(reasons[:3]) + (" …" if len(reasons) > 3 else ""))
    return {**data, "presets": good}, broken, note


def load_settings(path: Path | None = None, move_aside: bool = True) -> LoadResult:
    """The settings in effect. `move_aside=False` (a background reader wanting one value) never touches the file."""
    path = path or settings_path()
    if not path.exists():
        try:
            return LoadResult(Settings())
        except ValidationError as exc:
            return LoadResult(_FileOnly(), f"Ignored invalid ROOFLINE_* environment settings: {_errors(exc)}")
    problem: str | None = None
    data: Any = None
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        if not isinstance(data, dict):
            problem = "it does not hold a JSON object"
        elif int(data.get("version", 1)) > SETTINGS_VERSION:
            problem = (f"it was written by a newer Roofline (settings version {data.get('version')}, "
                       f"this one reads {SETTINGS_VERSION})")
    except (OSError, UnicodeDecodeError, ValueError, TypeError, OverflowError, RecursionError) as exc:
        # OverflowError: "version": 1e400 (int(inf)); RecursionError: thousands of nested brackets.
        problem = f"it is not valid JSON ({exc})"
    if problem is None:
        data, _, note = _split_presets(data)
        try:
            file_only = _FileOnly(**data)
        except ValidationError as exc:
            problem = "it has invalid values: " + _errors(exc)
        else:
            try:
                return LoadResult(Settings(**data), note)
            except ValidationError as exc:
                return LoadResult(file_only, f"Ignored invalid ROOFLINE_* environment settings: {_errors(exc)}")
    if not move_aside:
        return LoadResult(Settings(), f"Settings file {path} could not be used ({problem}).")
    try:
        backup: Path | None = _move_aside(path)
        kept = f"The old file was kept as {backup.name}."  # type: ignore[union-attr]
    except OSError as exc:  # a read-only config folder: leave the file exactly as it is
        backup = None
        kept = f"The file was left untouched (it could not be moved aside: {exc.strerror or exc})."
    warning = f"Settings file {path} could not be used ({problem}); defaults are in effect. {kept}"
    return LoadResult(Settings(), warning, backup)


def save_settings(settings: Settings, path: Path | None = None) -> Path:
    """Write atomically; fields overridden by env vars keep the file's previous value."""
    path = path or settings_path()
    data = settings.model_dump(mode="json")
    previous: dict[str, Any] = {}
    try:
        loaded = json.loads(path.read_text(encoding="utf-8"))
        previous = loaded if isinstance(loaded, dict) else {}
    except (OSError, ValueError, RecursionError):
        pass
    env = _env_fields()
    if env:
        defaults = _FileOnly().model_dump(mode="json")
        for name in env:
            data[name] = previous.get(name, defaults[name])
    if "presets" not in env:
        presets = {key: p.model_dump(mode="json", exclude_none=True) for key, p in settings.presets.items()}
        _, broken, _ = _split_presets(previous)  # load_settings ignored these: write them back as they were
        data["presets"] = {**broken, **presets}  # a preset saved since for the same model replaces its broken one
    data["version"] = SETTINGS_VERSION
    # 0600: the settings name the user's models and servers; other local users have no business reading them.
    atomic_write.write_json(path, data, 0o600, trailing_newline=True)
    return path
