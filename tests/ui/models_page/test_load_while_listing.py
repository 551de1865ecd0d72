"""Load pressed on the Models page while its list is still being read: the model loads, and once the listing
ends the page is idle again (it once stayed busy for good). The listing is held by a gate the test opens."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from app.core.config import paths
from app.core.hub import downloads
from app.core.hub import listing as hub
from app.core.hub.files import destination
from app.ui.models_page import library_columns
from fake_window import make_window
from synth_gguf import write_synthetic_gguf

pytestmark = pytest.mark.gui


def test_load_while_the_list_is_read_leaves_the_page_idle(qtbot: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    gate = threading.Event()
    real = library_columns.list_with_fit

    def slow_listing(*args: Any, **kwargs: Any) -> Any:
        gate.wait(20)
        return real(*args, **kwargs)

    monkeypatch.setattr(library_columns, "list_with_fit", slow_listing)
    win = make_window(qtbot)
    win.show()
    win.pages.setCurrentWidget(win.models_page)  # as a click on the Models tab: the listing starts
    page = win.models_page.ensure()
    assert page.busy()
    dest = destination(paths.models_dir(), "someone/fresh", "fresh-F32.gguf")  # a finished download
    dest.parent.mkdir(parents=True, exist_ok=True)
    write_synthetic_gguf(dest, n_layers=1)
    variant = hub.Variant("F32", [hub.HubFile(dest.name, dest.stat().st_size, None)])
    job = downloads.Job(downloads.plan(variant, "someone/fresh", "0" * 40, paths.models_dir()))
    job.progress.state = "done"
    page.downloads_model.add(job)
    page.downloads_view.selectRow(0)
    assert page.load_btn.isEnabled()
    page.load_btn.click()  # while the list is still being read
    assert win.pages.currentWidget() is win.chat_page
    gate.set()
    qtbot.waitUntil(lambda: not page.busy(), timeout=20000)
    win.pages.setCurrentWidget(win.models_page)
    qtbot.waitUntil(lambda: any(m.path == dest for m in page.library_model.rows), timeout=20000)
    assert not page.busy()
    page.shutdown()
    win.close()
