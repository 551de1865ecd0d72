"""The Library's columns for this machine: does the model fit (and where), the largest context per KV cache
type, predicted prefill / decode tok/s — with the recommender's one-sentence reason on hover."""

from __future__ import annotations

from typing import Any

from PySide6.QtCore import Qt
from PySide6.QtGui import QBrush, QColor

from app.core.gguf.kv_types import KV_TYPES
from app.core.models import library
from app.core.models.fit import LIBRARY_CTX, LibraryFit, assess_models, machine_for_library
from app.ui.toolkit import theme

HEADERS = ["Fits here", f"Max context {' / '.join(KV_TYPES)}", "Prefill / decode tok/s"]
# the theme's colour role of each verdict (theme.Colors), read at each paint so that it follows a theme switch
VERDICT_ROLES = {"full GPU": "good", "partial GPU": "caution", "CPU only": "info", "does not fit": "warn"}


def list_with_fit() -> tuple[list[library.LocalModel], dict[str, LibraryFit]]:
    """(the library, path -> fit on this machine). Runs on a worker thread; measures nothing."""
    models = library.list_models()
    try:
        fits = assess_models(models, machine_for_library())
    except Exception:  # noqa: BLE001 - a probe or estimator gap must never hide the library itself
        fits = {}
    return models, fits


def data(fit: LibraryFit | None, col: int, role: int) -> Any:
    if role == Qt.ItemDataRole.DisplayRole:
        if fit is None:
            return ""
        return [fit.verdict, fit.ctx_text() if fit.runs else "—", fit.speed_text()][col]
    if role == Qt.ItemDataRole.ToolTipRole and fit is not None:
        speeds = (f"Predicted at {LIBRARY_CTX} context: prefill {fit.prefill_tps:.0f} tok/s, decode "
                  f"{fit.decode_tps:.1f} tok/s ({fit.speed_label}; decode limited by {fit.decode_bound})."
                  if fit.runs else "")
        return "\n".join(x for x in (fit.sentence, speeds) if x)
    if role == Qt.ItemDataRole.ForegroundRole and fit is not None and col == 0:
        return QBrush(QColor(getattr(theme.colors(), VERDICT_ROLES.get(fit.verdict, "muted"))))
    return None
