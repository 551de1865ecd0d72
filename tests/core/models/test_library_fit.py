"""The Library's per-machine columns: verdict, largest context per KV type, predicted speeds (from the
recommender, for local files), and the table showing them with the reason on hover."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from app.core.bench.zoo import zoo_path
from app.core.gguf.info import inspect_gguf
from app.core.models.fit import assess_models
from app.core.models.library import LocalModel
from app.core.predict.hardware import CPUInfo, GiB, HardwareInfo
from app.core.predict.recommend import Machine, max_context, memory_budget
from app.core.predict.speed import default_rates


def _machine(ram_gib: int) -> Machine:
    hw = HardwareInfo(CPUInfo("EPYC", "x86_64", 2, 2, ["AVX2", "AVX512F"]), ram_gib * GiB, ram_gib * GiB, [], False)
    return Machine(hw, default_rates(hw, None))


def _local(path: Path) -> LocalModel:
    info = inspect_gguf(path)
    return LocalModel(path, "library", path.stem, info.architecture, info.n_params, info.file_type,
                      path.stat().st_size, info.n_ctx_train, info=info)


def test_fit_verdicts_contexts_and_speeds(tmp_path: Path) -> None:
    small = _local(zoo_path("qwen2.5-0.5b", "Q4_K_M", tmp_path))
    big = _local(zoo_path("llama-3.1-8b", "Q8_0", tmp_path))
    broken = LocalModel(tmp_path / "bad.gguf", "library", "bad", broken="not a GGUF file")
    fits = assess_models([small, big, broken], _machine(8))
    assert str(broken.path) not in fits  # nothing to say about a broken file
    f = fits[str(small.path)]
    assert f.verdict == "CPU only" and f.runs and f.decode_tps > 0 and f.prefill_tps > f.decode_tps
    # smaller KV types hold more context; the largest is the recommender's own figure
    assert f.max_ctx["f16"] <= f.max_ctx["q8_0"] <= f.max_ctx["q4_0"] <= small.n_ctx_train
    budget = memory_budget(_machine(8).hw)
    assert f.max_ctx["q8_0"] == max_context(small.info, "q8_0", 0, budget)  # type: ignore[arg-type]
    assert f.speed_label == "uncalibrated" and "runs from RAM" in f.sentence
    assert f.ctx_text().count("/") == 2 and f.speed_text() != "—"
    g = fits[str(big.path)]  # 8.5 GB of Q8_0 weights in an 8 GiB machine less headroom
    assert g.verdict == "does not fit" and not g.runs and g.speed_text() == "—"


@pytest.mark.gui
def test_library_table_shows_the_fit_columns(tmp_path: Path, qtbot: Any) -> None:
    from PySide6.QtCore import Qt

    from app.ui.models_page import LibraryModel

    small = _local(zoo_path("llama-3.2-1b", "Q4_0", tmp_path))
    model = LibraryModel()
    model.fits = assess_models([small], _machine(24))
    model.set_rows([small])
    # (a long title is shown on two lines)
    headers = [model.headerData(c, Qt.Orientation.Horizontal).replace("\n", " ") for c in range(model.columnCount())]
    verdict_col = headers.index("Fits here")
    assert model.index(0, verdict_col).data() == "CPU only"
    assert "k /" in model.index(0, verdict_col + 1).data()
    speeds = model.index(0, verdict_col + 2).data()
    assert speeds.count("/") == 1 and float(speeds.split("/")[1].replace(",", "")) > 0
    assert "runs from RAM" in model.index(0, verdict_col).data(Qt.ItemDataRole.ToolTipRole)
    # the columns after the new ones still show what they did
    assert model.index(0, headers.index("Context")).data() == f"{small.n_ctx_train:,}"
    assert model.index(0, headers.index("Location / problem")).data() == str(small.path)


def test_settings_memory_costs_and_largest_fits(tmp_path: Path) -> None:
    from app.core.metrics.phase import fmt_bytes
    from app.core.predict.hardware import GPUInfo
    from app.core.predict.memory import MemoryConfig, estimate_memory
    from app.core.predict.recommend import Budget
    from app.ui.settings.memory import MemoryAdvisor

    path = zoo_path("llama-3.2-1b", "Q4_K_M", tmp_path)
    info = inspect_gguf(path)
    cpu_only = MemoryAdvisor(info, Budget(ram=4 * GiB, vram=0, unified=False, gpu=None))
    text = cpu_only.context_text(8192, "f16", None)
    kv = estimate_memory(info, MemoryConfig(n_ctx=8192), has_gpu=False).kv_bytes
    assert f"KV cache {fmt_bytes(kv)}" in text and ": fits this machine" in text
    largest = max_context(info, "f16", 0, cpu_only.budget)
    assert f"{largest:,} tokens" in text and largest < info.n_ctx_train  # 4 GiB cannot hold 128k of f16 KV
    assert "does NOT fit" in cpu_only.context_text(largest + 4096, "f16", None)
    assert "No GPU" in cpu_only.gpu_text(8192, "f16", None)
    gpu = GPUInfo("nvidia", "RTX 3060", 12 * GiB, 12 * GiB, 360.0, "8.6")
    with_gpu = MemoryAdvisor(info, Budget(ram=16 * GiB, vram=1 * GiB, unified=False, gpu=gpu))
    g = with_gpu.gpu_text(4096, "f16", 8)
    est = estimate_memory(info, MemoryConfig(n_ctx=4096, n_gpu_layers=8))
    assert g.startswith(f"{est.layers_on_gpu} of 16 layers on the GPU: {fmt_bytes(est.gpu.total)}")
    assert "Most that fit at this context:" in g and "partial GPU" in g  # 1 GiB holds some of the 1.2 GB
    assert MemoryAdvisor.for_model(str(tmp_path / "missing.gguf")) is None and MemoryAdvisor.for_model(None) is None


@pytest.mark.gui
def test_settings_dialog_shows_what_the_context_costs(tmp_path: Path, qtbot: Any) -> None:
    from app.core.config.settings import Settings
    from app.ui.settings.dialog import SettingsDialog

    path = zoo_path("qwen2.5-0.5b", "Q8_0", tmp_path)
    dlg = SettingsDialog(Settings(), model_path=str(path))
    qtbot.addWidget(dlg)
    dlg.n_ctx.setValue(4096)
    small = dlg.ctx_cost.text()
    dlg.n_ctx.setValue(16384)
    assert dlg.ctx_cost.text() != small and "KV cache" in dlg.ctx_cost.text()
    dlg.kv_type.setCurrentIndex(dlg.kv_type.findData("q8_0"))
    assert "q8_0" in dlg.ctx_cost.text() and dlg.gpu_cost.text()
    plain = SettingsDialog(Settings())  # no model: nothing to say, nothing breaks
    qtbot.addWidget(plain)
    assert plain.ctx_cost.text() == ""


def test_selector_advice_picks_among_the_quantizations_here(tmp_path: Path) -> None:
    from app.core.models.fit import selector_advice

    q8 = str(zoo_path("llama-3.2-1b", "Q8_0", tmp_path))
    q4 = str(zoo_path("llama-3.2-1b", "Q4_K_M", tmp_path))
    other = str(zoo_path("qwen2.5-0.5b", "Q4_K_M", tmp_path))
    infos = {p: inspect_gguf(p) for p in (q8, q4, other)}
    advice = selector_advice(infos, _machine(24))
    # one model in two quantizations: one is recommended, the other points to it; the other model stands alone
    mine = [p for p in (q8, q4) if advice[p].startswith("Recommended: this file (best of the 2")]
    assert len(mine) == 1
    (rest,) = {q8, q4} - set(mine)
    assert advice[rest].startswith("Roofline recommends") and Path(mine[0]).name in advice[rest]
    assert advice[other].startswith("Recommended: this file, 8k context with a f16 KV cache.")
    assert "runs from RAM" in advice[other]


@pytest.mark.gui
def test_model_selector_tooltips_say_what_is_recommended(tmp_path: Path, qtbot: Any) -> None:
    from PySide6.QtCore import Qt
    from PySide6.QtGui import QTextDocumentFragment
    from PySide6.QtWidgets import QComboBox

    from app.ui.model_bar.tips import annotate

    folder = tmp_path / "<b>models"  # a folder name with markup: shown literally, never as rich text
    folder.mkdir()
    path = str(zoo_path("qwen2.5-0.5b", "Q4_K_M", folder))
    combo = QComboBox()
    qtbot.addWidget(combo)
    combo.addItem("zoo", path)
    combo.addItem("Open GGUF file…", "__open__")
    tips = annotate(combo)
    qtbot.waitUntil(lambda: "Recommended" in (combo.itemData(0, Qt.ItemDataRole.ToolTipRole) or ""), timeout=20000)
    tip = combo.itemData(0, Qt.ItemDataRole.ToolTipRole)
    assert "<b>models" not in tip  # escaped
    assert QTextDocumentFragment.fromHtml(tip).toPlainText().startswith(path + "\n")
    assert annotate(combo) is tips  # one per selector
