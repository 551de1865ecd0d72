"""User settings: one JSON file in the config dir, validated by pydantic-settings, `ROOFLINE_*` env overrides.

Loading never fails: a file that is not JSON, does not validate, or was written by a newer Roofline is
moved aside as `settings.json.bak-<timestamp>` (nothing is lost) and the defaults are used, with a warning
the UI shows. Environment variables (`ROOFLINE_N_CTX=8192`, nested: `ROOFLINE_SAMPLING__TEMPERATURE=0.2`)
win over the file for this run but are never written back into it.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field, ValidationError, field_validator
from pydantic_settings import BaseSettings, PydanticBaseSettingsSource, SettingsConfigDict

from app.core import paths

SETTINGS_VERSION = 1
SETTINGS_FILENAME = "settings.json"

KvType = Literal["f16", "q8_0", "q4_0"]


class SamplingDefaults(BaseModel):
    temperature: float = Field(default=0.8, ge=0.0, le=5.0)
    top_p: float = Field(default=0.95, ge=0.0, le=1.0)
    top_k: int = Field(default=40, ge=0)
    min_p: float = Field(default=0.05, ge=0.0, le=1.0)
    repeat_penalty: float = Field(default=1.1, ge=0.0, le=5.0)
    max_tokens: int = Field(default=512, ge=1, le=1_000_000)
    seed: int | None = None  # None: random each time


class WindowState(BaseModel):
    geometry: str = ""  # base64 of QWidget.saveGeometry()
    state: str = ""  # base64 of QMainWindow.saveState() (dock layout)
    dashboard_visible: bool = True
    theme: Literal["system", "light", "dark"] = "system"  # View ▸ Theme


class Settings(BaseSettings):
    model_config = SettingsConfigDict(
        env_prefix="ROOFLINE_", env_nested_delimiter="__", extra="ignore", validate_assignment=True
    )

    version: int = SETTINGS_VERSION
    models_dir: str | None = None  # None: paths.models_dir()
    threads: int | None = Field(default=None, ge=1, le=1024)  # None: llama.cpp picks (physical cores)
    n_ctx: int = Field(default=4096, ge=256, le=1 << 21)
    n_gpu_layers: int | None = Field(default=None, ge=-1)  # None: auto (all layers when the build can offload)
    kv_cache_type: KvType = "f16"
    flash_attn: bool | None = None  # None: llama.cpp decides
    n_batch: int = Field(default=512, ge=1, le=1 << 16)
    n_ubatch: int = Field(default=512, ge=1, le=1 << 16)
    last_model: str | None = None
    # The most a hub file's header (metadata + tensor table) may take before it is refused; real ones are 1-10 MiB.
    max_remote_header_mib: int = Field(default=64, ge=1, le=4096)
    sampling: SamplingDefaults = Field(default_factory=SamplingDefaults)
    window: WindowState = Field(default_factory=WindowState)

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        # The file's values arrive as init kwargs; env vars must win over them.
        return (env_settings, init_settings)

    @field_validator("models_dir", "last_model")
    @classmethod
    def _no_nul(cls, value: str | None) -> str | None:
        # A NUL byte makes every later filesystem call raise ValueError (not OSError): refuse it here.
        if value is not None and "\x00" in value:
            raise ValueError("a path cannot contain a NUL byte")
        return value

    def resolved_models_dir(self) -> Path:
        return Path(self.models_dir).expanduser() if self.models_dir else paths.models_dir()


class _FileOnly(Settings):
    """The same schema without env vars: what the file itself says (used when saving)."""

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        return (init_settings,)


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
    stamp = time.strftime("%Y%m%d-%H%M%S")
    backup = path.with_name(f"{path.name}.bak-{stamp}")
    n = 1
    while backup.exists():
        backup = path.with_name(f"{path.name}.bak-{stamp}-{n}")
        n += 1
    os.replace(path, backup)
    return backup


def _errors(exc: ValidationError) -> str:
    return "; ".join(f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in exc.errors()[:3])


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
        try:
            file_only = _FileOnly(**data)
        except ValidationError as exc:
            problem = "it has invalid values: " + _errors(exc)
        else:
            try:
                return LoadResult(Settings(**data))
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
    env = _env_fields()
    if env:
        previous: dict[str, Any] = {}
        try:
            loaded = json.loads(path.read_text(encoding="utf-8"))
            previous = loaded if isinstance(loaded, dict) else {}
        except (OSError, ValueError):
            pass
        defaults = _FileOnly().model_dump(mode="json")
        for name in env:
            data[name] = previous.get(name, defaults[name])
    data["version"] = SETTINGS_VERSION
    tmp = path.with_name(path.name + ".tmp")
    tmp.unlink(missing_ok=True)  # a leftover could carry other permissions
    # 0600: the settings name the user's models and servers; other local users have no business reading them.
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        fh.write(json.dumps(data, indent=2) + "\n")
    os.replace(tmp, path)
    return path
