"""Discover's Download button says why it does nothing: disabled with a reason until a quantization is picked
(it used to stay enabled and do nothing). No hub: the rows are set by hand."""

from __future__ import annotations

from typing import Any

import pytest

from app.core.gguf.remote_header import VariantAssessment

pytestmark = pytest.mark.gui


@pytest.fixture
def page(qtbot: Any) -> Any:
    from app.ui.models_page import ModelsPage

    p = ModelsPage()
    yield p
    p.shutdown()
    qtbot.waitUntil(lambda: not p.busy(), timeout=20000)
    p.close()
    p.deleteLater()


def test_download_is_disabled_with_a_reason_until_a_quantization_is_picked(page: Any) -> None:
    button = page.download_btn
    assert not button.isEnabled() and "Pick" in button.toolTip()
    rows = [VariantAssessment(quant=q, size=size, files=[f"m-{q}.gguf"], verdict="CPU", note="")
            for q, size in (("Q4_K_M", 400_000_000), ("Q8_0", 700_000_000))]
    page.variant_model.set_rows(rows)
    assert not button.isEnabled()  # a list, nothing picked yet
    page.variant_view.selectRow(1)
    assert button.isEnabled() and "Download the selected" in button.toolTip()
    page.variant_model.set_rows([])  # another repository opens
    assert not button.isEnabled() and "Pick" in button.toolTip()
