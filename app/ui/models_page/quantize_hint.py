"""Whether the Models page's Quantize… button applies to a model, and the tooltip that says why not.

The quantizer re-quantizes from full-precision weights only; from an already quantized file it would
stack a second rounding error on the first, so the button stays disabled and its tooltip says so.
"""

from __future__ import annotations

from PySide6.QtWidgets import QPushButton

from app.core.models.library import LocalModel

QUANTIZABLE_SOURCES = ("F32", "F16", "BF16")


def quantize_hint(model: LocalModel | None) -> tuple[bool, str]:
    """(enabled, tooltip) for the Quantize… button with `model` selected."""
    if model is None:
        return False, "Select a model to quantize."
    if model.broken:
        return False, f"This file cannot be used: {model.broken}"
    if model.quant not in QUANTIZABLE_SOURCES:
        return False, (f"This model is already quantized ({model.quant or 'unknown type'}). Quantizing starts from "
                       f"full-precision weights only: F32, F16 or BF16 files.")
    return True, "Make a smaller quantized copy of this model (saved under models/quantized/)."


def apply_quantize_hint(button: QPushButton, model: LocalModel | None) -> None:
    enabled, tip = quantize_hint(model)
    button.setEnabled(enabled)
    button.setToolTip(tip)
