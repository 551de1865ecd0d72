"""The Settings dialog's round trip: what the user sets is what the settings file holds, and a quantized
cache without flash attention is refused with its reason."""

from __future__ import annotations

import pytest

from app.core.config import settings as S

pytestmark = pytest.mark.gui


def test_settings_dialog_round_trip(qtbot):
    from app.ui.settings.dialog import AUTO, SettingsDialog

    dlg = SettingsDialog(S.Settings())
    qtbot.addWidget(dlg)
    assert dlg.gpu_layers.value() == AUTO and dlg.threads.value() == 0
    dlg.n_ctx.setValue(8192)
    dlg.threads.setValue(2)
    dlg.kv_type.setCurrentIndex(dlg.kv_type.findData("q8_0"))
    dlg.flash.setCurrentIndex(dlg.flash.findData(True))
    dlg.sampling.temperature.setValue(0.3)
    dlg.sampling.seed_fixed.setChecked(True)
    dlg.sampling.seed.setValue(42)
    dlg.cpu_moe.setValue(6)
    result = dlg.result_settings()
    S.save_settings(result)
    loaded = S.load_settings().settings
    assert (loaded.n_ctx, loaded.threads, loaded.kv_cache_type, loaded.flash_attn) == (8192, 2, "q8_0", True)
    assert loaded.n_cpu_moe == 6
    assert loaded.n_gpu_layers is None
    assert (loaded.sampling.temperature, loaded.sampling.seed) == (0.3, 42)
    # A quantized cache with flash attention off is refused with a visible reason.
    dlg.flash.setCurrentIndex(dlg.flash.findData(False))
    dlg._accept()
    assert "flash attention" in dlg.warning.text() and dlg.result() == 0
