"""Discover's "Recommended for this machine": the curated list shows with verdicts offline, the best pick is
marked, Download says in one line that it needs a connection, and with a hub it hands over a planned download."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from app.core.models.curated import CURATED
from app.core.predict.hardware import CPUInfo, GiB, HardwareInfo
from app.core.predict.recommend import NONE, Machine
from app.core.predict.speed import default_rates
from hubserver import HubServer

pytestmark = pytest.mark.gui


def _machine(ram_gib: float) -> Machine:
    hw = HardwareInfo(CPUInfo("EPYC", "x86_64", 2, 2, ["AVX2"]), int(ram_gib * GiB), int(ram_gib * GiB), [], False)
    return Machine(hw, default_rates(hw, None))


@pytest.fixture
def picks(qtbot: Any) -> Any:
    from app.ui.models_page.discover_picks import RecommendedPicks

    w = RecommendedPicks()
    qtbot.addWidget(w)
    w.assess(_machine(3))
    qtbot.waitUntil(lambda: not w.assessing, timeout=20_000)
    return w


def test_offline_the_list_shows_with_verdicts_and_download_says_why(picks: Any, qtbot: Any, qtmodeltester: Any,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    qtmodeltester.check(picks.model, force_py=True)
    model = picks.model
    assert model.rowCount() == len(CURATED)
    verdicts = {model.index(r, 0).data().removeprefix("★ ").removesuffix(" (best pick)"): model.index(r, 2).data()
                for r in range(model.rowCount())}
    assert "…" not in verdicts.values()
    assert verdicts["Qwen2.5 7B Instruct"] == NONE  # 3 GiB of memory: no 7B
    best = [model.index(r, 0).data() for r in range(model.rowCount()) if "best pick" in model.index(r, 0).data()]
    assert len(best) == 1 and picks.selected() is not None and picks.selected().title in best[0]
    got: list[Any] = []
    picks.download_ready.connect(got.append)
    assert picks.download_selected()
    qtbot.waitUntil(lambda: picks.status.text().startswith("Download needs a connection to the hub:"), timeout=10_000)
    assert "\n" not in picks.status.text() and got == [] and picks.download_button.isEnabled()


def test_download_without_a_selection_says_so(picks: Any) -> None:
    picks.view.clearSelection()
    assert not picks.download_button.isEnabled()
    assert not picks.download_selected() and picks.status.text() == "Select a model in the list first."


def test_with_a_hub_download_hands_over_the_curated_file(picks: Any, qtbot: Any, hub_server: HubServer,
                                                         tmp_path: Path) -> None:
    m = CURATED[0]
    small = tmp_path / "q.gguf"
    small.write_bytes(b"GGUF" + bytes(60))
    hub_server.state.add_repo(m.repo_id, {m.file: small, m.file.replace("Q4_K_M", "Q8_0"): small}, fake_sha=True)
    picks.view.selectRow(0)
    with qtbot.waitSignal(picks.download_ready, timeout=10_000) as blocker:
        picks.download_selected()
    task = blocker.args[0]
    assert task.repo_id == m.repo_id and [f.path for f in task.files] == [m.file]


def test_the_models_page_shows_the_picks_first_and_downloads_from_them(qtbot: Any, hub_server: HubServer,
                                                                       tmp_path: Path) -> None:
    from app.ui.models_page import ModelsPage

    m = CURATED[0]
    small = tmp_path / "q.gguf"
    small.write_bytes(b"GGUF" + bytes(60))
    hub_server.state.add_repo(m.repo_id, {m.file: small})
    page = ModelsPage()
    try:
        qtbot.waitUntil(lambda: not page.picks.assessing, timeout=20_000)
        assert page.picks.model.index(0, 2).data() != "…"
        page.picks.view.selectRow(0)
        page.picks.download_selected()
        qtbot.waitUntil(lambda: page.downloads_model.rowCount() == 1, timeout=10_000)
        job = page.downloads_model.job(page.downloads_model.index(0, 0))
        assert job is not None and job.task.repo_id == m.repo_id
    finally:
        page.shutdown()
        qtbot.waitUntil(lambda: not page.busy(), timeout=20_000)
        page.close()
        page.deleteLater()
