"""The toolbar's model selector: which models it lists, and whether choosing one needs a load.

It lists the same files as the library (sub-folders such as imported/ and quantized/ included), so a model
imported or quantized in the Models page can be chosen from the toolbar too.
"""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QComboBox

from app.core.config.settings import Settings
from app.core.models.library import model_files
from app.ui.model_bar import tips as model_tips
from app.ui.toolkit.safe_text import tooltip_html

OPEN_FILE = "__open__"
CONNECT_REMOTE = "__remote__"


def selector_entries(settings: Settings) -> list[Path]:
    """The last model, the default model, every model in the models folder, then the GGUF files in the
    Hugging Face cache (the library lists those too), without repeats."""
    from app.core.models.default_model import default_model_path
    from app.core.models.library import hf_cache_dir

    entries: list[Path] = []
    if settings.last_model:
        entries.append(Path(settings.last_model))
    entries.append(default_model_path(ensure=False))
    try:
        entries += model_files(settings.resolved_models_dir())
    except OSError:
        pass  # an unreadable models folder still leaves the default model and "Open GGUF file…"
    try:
        entries += model_files(hf_cache_dir())
    except OSError:
        pass
    seen: set[str] = set()
    unique: list[Path] = []
    for path in entries:
        if str(path) not in seen:
            seen.add(str(path))
            unique.append(path)
    return unique


def label_for(path: Path, models_dir: Path) -> str:
    """The file name, with its sub-folder when it has one (two quants of one model differ only there)."""
    try:
        return path.relative_to(models_dir).as_posix()
    except ValueError:
        return path.name


def populate(combo: QComboBox, settings: Settings) -> None:
    combo.clear()
    models_dir = settings.resolved_models_dir()
    for path in selector_entries(settings):
        combo.addItem(label_for(path, models_dir), str(path))
        combo.setItemData(combo.count() - 1, tooltip_html(str(path)), Qt.ItemDataRole.ToolTipRole)
    combo.addItem("Open GGUF file…", OPEN_FILE)
    combo.addItem("Connect to a server…", CONNECT_REMOTE)
    model_tips.annotate(combo)  # tooltips: the recommended quant/context and why


def needs_load(chosen: str, session_model: str | None, loaded_model: str | None) -> bool:
    """True unless `chosen` is the model the engine has loaded right now.

    After a failed load or server connection the session still names the old model but the engine holds
    none; choosing it again must load it rather than do nothing.
    """
    return not (chosen == session_model and chosen == loaded_model)
