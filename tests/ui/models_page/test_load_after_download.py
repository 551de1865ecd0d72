"""After a download (issue 32, Load after download): the finished download is selected and its Load button
loads it in one click; the Discover list marks a quantization already in the models folder, and its button
says Load (and loads it) instead of downloading it again. No hub: the listing is set as the hub would give
it, the finished download's file written where the download puts it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from app.core.bench.zoo import zoo_path
from app.core.config import paths
from app.core.gguf.remote_header import VariantAssessment
from app.core.hub import downloads
from app.core.hub import listing as hub
from app.core.hub.files import destination

pytestmark = pytest.mark.gui

REPO = "someone/tiny-GGUF"
FILES = {"Q4_K_M": "tiny-Q4_K_M.gguf", "Q8_0": "tiny-Q8_0.gguf"}


@pytest.fixture
def page(qtbot: Any) -> Any:
    from app.ui.models_page import ModelsPage

    p = ModelsPage()
    qtbot.addWidget(p)
    p.show()
    yield p
    p.shutdown()
    qtbot.waitUntil(lambda: not p.busy(), timeout=20000)


def listing() -> hub.RepoVariants:
    return hub.RepoVariants(REPO, "0" * 40, [hub.Variant(q, [hub.HubFile(f, 1000, None)]) for q, f in FILES.items()])


def rows() -> list[VariantAssessment]:
    return [VariantAssessment(quant=q, size=1000, files=[f], verdict="CPU only", note="") for q, f in FILES.items()]


def downloaded(quant: str) -> Path:
    dest = destination(paths.models_dir(), REPO, FILES[quant])
    dest.parent.mkdir(parents=True, exist_ok=True)
    zoo_path("qwen2.5-0.5b", quant, dest.parent).rename(dest)  # a real GGUF header, as the file would be
    return dest


def test_a_finished_download_loads_in_one_click(page: Any, qtbot: Any) -> None:
    qtbot.waitUntil(lambda: not page.busy(), timeout=20000)  # the page's first listing (a download takes longer)
    rv = listing()
    task = downloads.plan(rv.variants[0], REPO, rv.revision, paths.models_dir())
    job = downloads.Job(task)
    page.downloads_model.add(job)
    assert not page.load_btn.isEnabled()
    downloaded("Q4_K_M")
    job.progress.state = "done"
    page._dl_bridge.finished.emit(job.id)  # the download manager's "finished"
    qtbot.waitUntil(lambda: not page.busy(), timeout=90000)  # the library lists the new file
    assert page.selected_job() is job and page.load_btn.isEnabled()
    with qtbot.waitSignal(page.model_chosen) as chosen:
        page.load_btn.click()
    assert chosen.args == [str(task.dest)]


def test_the_hub_list_marks_what_is_downloaded_and_loads_it(page: Any, qtbot: Any) -> None:
    here = downloaded("Q8_0")
    page._show_variants((listing(), rows()))  # a repository opened in Discover
    model = page.variant_model
    texts = [model.index(r, 0).data() for r in range(model.rowCount())]
    assert texts == ["Q4_K_M", "✓ Q8_0"]
    assert model.index(1, 7).data().startswith("downloaded")
    page.variant_view.selectRow(0)
    assert page.download_btn.text() == "Download"
    page.variant_view.selectRow(1)
    assert page.download_btn.text() == "Load"
    before = len(page.downloads_model.jobs)
    with qtbot.waitSignal(page.model_chosen) as chosen:
        page.download_btn.click()
    assert chosen.args == [str(here)] and len(page.downloads_model.jobs) == before  # nothing downloaded again
