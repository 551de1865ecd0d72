"""Where Roofline keeps its files: one place, overridable with ROOFLINE_HOME (tests use a temp dir)."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import platformdirs

APP_NAME = "roofline"


def _home() -> Path | None:
    value = os.environ.get("ROOFLINE_HOME")
    return Path(value) if value else None


def _folder(kind: str, platform_dir: Callable[..., str]) -> Path:
    """$ROOFLINE_HOME/<kind> when set, else the platform's folder for this kind; created if missing."""
    home = _home()
    path = home / kind if home else Path(platform_dir(APP_NAME, appauthor=False))
    path.mkdir(parents=True, exist_ok=True)
    return path


def data_dir() -> Path:
    """Models, chats database, measurements."""
    return _folder("data", platformdirs.user_data_dir)


def config_dir() -> Path:
    """Settings file."""
    return _folder("config", platformdirs.user_config_dir)


def cache_dir() -> Path:
    """Re-creatable things: bandwidth probe results, remote GGUF headers."""
    return _folder("cache", platformdirs.user_cache_dir)


def default_models_dir() -> Path:
    """The data folder's models/: where set-up puts the default model, and the models folder until the user
    chooses another."""
    path = data_dir() / "models"
    path.mkdir(parents=True, exist_ok=True)
    return path


def models_dir() -> Path:
    """The models folder: the one chosen in the settings (`models_dir` in settings.json, or
    ROOFLINE_MODELS_DIR), else default_models_dir(). The library lists it (sub-folders included), downloads and
    quantized models go into it, and the toolbar's model list shows it, so every part of the app sees one folder."""
    from app.core.config.settings import load_settings  # here: settings imports this module

    chosen = load_settings(move_aside=False).settings.models_dir
    if not chosen:
        return default_models_dir()
    path = Path(chosen).expanduser()
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError:
        pass  # a folder on a drive not mounted now: listing it finds nothing, writing there says why
    return path
