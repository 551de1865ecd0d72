"""One models folder: the one chosen in the settings is what the library lists (sub-folders included), where
downloads and quantized models go, and what the toolbar shows."""

from __future__ import annotations

import re
from pathlib import Path

from app.core.config import paths
from app.core.config.settings import load_settings, save_settings
from app.core.models import library
from app.core.models.default_model import default_model_path
from app.ui.model_bar.selector import selector_entries
from synth_gguf import write_synthetic_gguf

APP = Path(__file__).resolve().parents[3] / "app"


def _choose(folder: Path) -> None:
    settings = load_settings().settings
    settings.models_dir = str(folder)
    save_settings(settings)


def test_the_chosen_folder_is_the_models_folder_everywhere(tmp_path: Path) -> None:
    assert paths.models_dir() == paths.default_models_dir()
    chosen = tmp_path / "my models"
    _choose(chosen)
    assert paths.models_dir() == chosen and chosen.is_dir()
    (chosen / "acme").mkdir()
    model = write_synthetic_gguf(chosen / "acme" / "tiny-F32.gguf", n_layers=1)
    assert model in [m.path for m in library.list_models() if m.source == "library"]
    assert model in selector_entries(load_settings().settings)
    # the default model stays where set-up assembled it
    assert default_model_path(ensure=False).parent == paths.default_models_dir()


def test_no_one_builds_the_models_folder_path_itself() -> None:
    """Downloads, quantization, import and the library all ask paths.models_dir()."""
    offenders = [str(p.relative_to(APP)) for p in APP.rglob("*.py") if p.name != "paths.py"
                 and re.search(r"data_dir\(\)\s*/\s*\"models\"", p.read_text(encoding="utf-8"))]
    assert offenders == []
