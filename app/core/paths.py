"""Where Roofline keeps its files: one place, overridable with ROOFLINE_HOME (tests use a temp dir)."""

from __future__ import annotations

import os
from pathlib import Path

import platformdirs

APP_NAME = "roofline"


def _home() -> Path | None:
    value = os.environ.get("ROOFLINE_HOME")
    return Path(value) if value else None


def data_dir() -> Path:
    """Models, chats database, measurements."""
    home = _home()
    path = home / "data" if home else Path(platformdirs.user_data_dir(APP_NAME, appauthor=False))
    path.mkdir(parents=True, exist_ok=True)
    return path


def config_dir() -> Path:
    """Settings file."""
    home = _home()
    path = home / "config" if home else Path(platformdirs.user_config_dir(APP_NAME, appauthor=False))
    path.mkdir(parents=True, exist_ok=True)
    return path


def cache_dir() -> Path:
    """Re-creatable things: bandwidth probe results, remote GGUF headers."""
    home = _home()
    path = home / "cache" if home else Path(platformdirs.user_cache_dir(APP_NAME, appauthor=False))
    path.mkdir(parents=True, exist_ok=True)
    return path


def models_dir() -> Path:
    path = data_dir() / "models"
    path.mkdir(parents=True, exist_ok=True)
    return path
