"""The Models page offscreen: qtmodeltester on every model, library actions, Discover with remote headers,
downloads with progress/pause/resume/cancel, the quantize dialog."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from app.core.config import paths
from app.core.hub import downloads
from app.core.models import library
from big_gguf import write_header_only
from hubserver import HubServer, sha256_of
from synth_gguf import write_synthetic_gguf

pytestmark = pytest.mark.gui

BIG_QUANTS = ["Q2_K", "Q3_K_M", "Q4_0", "Q4_K_M", "Q5_K_M", "Q6_K", "Q8_0", "F16"]


@pytest.fixture(autouse=True)
def recorded_machine(monkeypatch: pytest.MonkeyPatch) -> Any:
    """Predictions for a recorded machine like the development one (2 cores, 24 GiB, ~13 GB/s, no GPU):
    the page's plumbing is under test here, not this host's load-dependent bandwidth probe."""
    from app.core.gguf import remote_header as remote_gguf
    from app.core.predict.bandwidth import BandwidthResult
    from app.core.predict.hardware import CPUInfo, GiB, HardwareInfo
    from app.core.predict.recommend import Machine
    from app.core.predict.speed import default_rates

    bw = BandwidthResult(read_gbs=13.0, copy_gbs=10.0, threads=2, buffer_bytes=1 << 28, runs=5, seconds=1.0,
                         measured_at="recorded", gemm_gflops=400.0)
    hw = HardwareInfo(CPUInfo("Xeon", "x86_64", 2, 2, ["AVX2", "AVX512F"]), 24 * GiB, 20 * GiB, [], False)
    machine = Machine(hw, default_rates(hw, bw))
    monkeypatch.setattr(remote_gguf, "this_machine", lambda: machine)
    return machine


@pytest.fixture
def page(qtbot: Any) -> Any:
    from app.ui.models_page import ModelsPage

    p = ModelsPage()
    p.resize(1280, 760)
    yield p
    p.shutdown()
    # Wait for its background tasks while the page still exists, then close it ourselves: with
    # qtbot.addWidget, pytest-qt closes (deletes) the page as the test ends, before this teardown, and a
    # task still running then (a library refresh, under load) reported to a deleted page: busy forever.
    qtbot.waitUntil(lambda: not p.busy(), timeout=20000)
    p.close()
    p.deleteLater()


def _assessed(page: Any) -> bool:
    rows = page.variant_model.rows
    return bool(rows) and all(r.verdict != "…" for r in rows)


@pytest.fixture
def big_repo(hub_server: HubServer, tmp_path_factory: pytest.TempPathFactory) -> str:
    d = tmp_path_factory.mktemp("big")
    files = {f"Meta-Llama-3.1-8B-Instruct-{q}.gguf": write_header_only(d / f"{q}.gguf", q) for q in BIG_QUANTS}
    hub_server.state.add_repo("bartowski/Meta-Llama-3.1-8B-Instruct-GGUF", files, downloads=9000, likes=300,
                              fake_sha=True)
    return "bartowski/Meta-Llama-3.1-8B-Instruct-GGUF"


def test_library_tab_lists_and_models_pass_modeltester(page: Any, qtbot: Any, qtmodeltester: Any,
                                                       tmp_path: Path) -> None:
    write_synthetic_gguf(paths.models_dir() / "tiny-F32.gguf", n_layers=1)
    (paths.models_dir() / "broken.gguf").write_bytes(b"GGUF\x03\x00\x00\x00garbage")
    page.refresh_library()
    qtbot.waitUntil(lambda: page.library_model.rowCount() >= 2, timeout=10000)
    qtmodeltester.check(page.library_model)
    names = {page.library_model.row(page.library_model.index(r, 0)).path.name: r
             for r in range(page.library_model.rowCount())}
    broken_row = names["broken.gguf"]
    assert page.library_model.index(broken_row, 1).data() == "BROKEN"
    assert "Broken:" in page.library_model.index(broken_row, 0).data(3)  # tooltip says why
    # Choose a model: the signal carries its path.
    page.library_view.selectRow(names["tiny-F32.gguf"])
    assert page.quantize_btn.isEnabled()
    with qtbot.waitSignal(page.model_chosen, timeout=2000) as sig:
        page.use_btn.click()
    assert sig.args == [str(paths.models_dir() / "tiny-F32.gguf")]


def test_remove_asks_and_respects_no(page: Any, qtbot: Any) -> None:
    target = write_synthetic_gguf(paths.models_dir() / "victim.gguf", n_layers=1)
    page.refresh_library()
    qtbot.waitUntil(lambda: page.library_model.rowCount() >= 1, timeout=10000)
    row = next(r for r in range(page.library_model.rowCount())
               if page.library_model.rows[r].path == target)
    page.library_view.selectRow(row)
    answers = iter([False, True])
    asked: list[str] = []

    def confirm(model: library.LocalModel) -> bool:
        asked.append(model.path.name)
        return next(answers)

    page.confirm_remove = confirm
    page.remove_btn.click()
    assert target.exists() and asked == ["victim.gguf"]
    page.remove_btn.click()
    qtbot.waitUntil(lambda: not target.exists(), timeout=10000)
    qtbot.waitUntil(lambda: all(m.path != target for m in page.library_model.rows), timeout=10000)


def test_discover_shows_verdicts_and_speeds_from_remote_headers(page: Any, qtbot: Any, qtmodeltester: Any,
                                                               hub_server: HubServer, big_repo: str,
                                                               tmp_path: Path) -> None:
    page.tabs.setCurrentIndex(1)
    page.search_edit.setText("llama")
    page.search_btn.click()
    qtbot.waitUntil(lambda: page.search_model.rowCount() == 1, timeout=15000)
    qtmodeltester.check(page.search_model)
    hub_server.state.throttle_bps = 256 << 10  # slow header reads: the listing must show before them
    page.search_view.selectRow(0)  # opens the repo
    # Sizes first (from the listing), then verdicts once the headers are read.
    qtbot.waitUntil(lambda: page.variant_model.rowCount() == len(BIG_QUANTS), timeout=30000)
    early = list(page.variant_model.rows)
    assert all(r.verdict == "…" for r in early) and all(r.size > 2e9 for r in early)
    hub_server.state.throttle_bps = None
    qtbot.waitUntil(lambda: _assessed(page), timeout=30000)
    qtmodeltester.check(page.variant_model)
    rows = page.variant_model.rows
    assert sorted(r.quant for r in rows) == sorted(BIG_QUANTS)
    assert [r.size for r in rows] == sorted(r.size for r in rows)  # smallest first
    assert sum(r.recommended for r in rows) == 1
    for r in rows:
        assert r.error is None
        assert r.verdict in ("full GPU", "partial", "CPU", "won't fit")
    fits = [r for r in rows if r.verdict != "won't fit"]
    assert fits, "an 8B model fits this machine in some quantization"
    for r in fits:
        assert r.decode_tps and r.decode_tps > 0 and r.prefill_tps and r.prefill_tps > 0 and r.max_context
    # Smaller files decode faster (decode is memory-bound).
    by_size = sorted(fits, key=lambda r: r.size)
    assert by_size[0].decode_tps > by_size[-1].decode_tps
    # Only headers crossed the network: a few KB per 2.6-16 GB file.
    for name in hub_server.state.repos[big_repo].files:
        assert hub_server.state.served(name) < 2 << 20
    page.show()
    qtbot.waitExposed(page)
    # The screenshot goes to the test's own folder unless ROOFLINE_SHOTS names one (to collect them).
    shots = Path(os.environ.get("ROOFLINE_SHOTS") or tmp_path)
    shots.mkdir(parents=True, exist_ok=True)
    assert page.grab().save(str(shots / "models_discover.png"))


def test_download_from_discover_with_pause_resume(page: Any, qtbot: Any, qtmodeltester: Any,
                                                  hub_server: HubServer, tmp_path: Path) -> None:
    src = write_synthetic_gguf(tmp_path / "s.gguf", n_layers=4)
    hub_server.state.add_repo("acme/Tiny-GGUF", {"Tiny-F32.gguf": src})
    hub_server.state.throttle_bps = 3 << 20
    page.open_repo("acme/Tiny-GGUF")
    qtbot.waitUntil(lambda: page.variant_model.rowCount() == 1 and _assessed(page), timeout=15000)
    page.variant_view.selectRow(0)
    job = page.download_selected()
    assert job is not None
    qtmodeltester.check(page.downloads_model)
    page.downloads_view.selectRow(0)
    qtbot.waitUntil(lambda: job.progress.done > (1 << 20), timeout=15000)
    assert page.pause_btn.isEnabled()
    page.pause_btn.click()
    qtbot.waitUntil(lambda: job.progress.state == "paused", timeout=10000)
    qtbot.waitUntil(lambda: page.resume_btn.isEnabled() and not page.pause_btn.isEnabled(), timeout=5000)
    hub_server.state.throttle_bps = None
    page.resume_btn.click()
    qtbot.waitUntil(lambda: job.progress.state == "done", timeout=20000)
    assert sha256_of(job.result) == sha256_of(src)
    qtbot.waitUntil(lambda: any(m.path == job.result for m in page.library_model.rows), timeout=10000)
    assert "100%" in page.downloads_model.index(0, 1).data()


def test_unfinished_download_from_last_run_shows_paused(hub_server: HubServer, tmp_path: Path, qtbot: Any) -> None:
    src = write_synthetic_gguf(tmp_path / "s.gguf", n_layers=2)
    hub_server.state.add_repo("acme/Tiny-GGUF", {"Tiny-F32.gguf": src})
    hub_server.state.drop_after["Tiny-F32.gguf"] = 100_000
    from app.core.hub import listing as hub

    rv = hub.list_variants("acme/Tiny-GGUF")
    task = downloads.plan(rv.variants[0], rv.repo_id, rv.revision, paths.models_dir())
    with pytest.raises(hub.HubError):
        downloads.download_variant(task)
    from app.ui.models_page import ModelsPage

    p = ModelsPage()
    qtbot.addWidget(p)
    assert p.downloads_model.rowCount() == 1
    job = p.downloads_model.jobs[0]
    assert job.progress.state == "paused" and job.progress.done == 100_000
    p.downloads_view.selectRow(0)
    p.resume_btn.click()
    qtbot.waitUntil(lambda: job.progress.state == "done", timeout=20000)
    assert job.progress.resumed_from == 100_000 and sha256_of(task.dest) == sha256_of(src)
    p.shutdown()
    qtbot.waitUntil(lambda: not p.busy(), timeout=20000)


def test_offline_search_shows_the_message(page: Any, qtbot: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    page.search_edit.setText("llama")
    page.search_btn.click()
    qtbot.waitUntil(lambda: "offline" in page.search_status.text(), timeout=10000)


def test_quantize_dialog_runs_and_registers(page: Any, qtbot: Any, tmp_path: Path) -> None:
    src = write_synthetic_gguf(paths.models_dir() / "tiny-F32.gguf", n_layers=2)
    from app.ui.models_page import QuantizeDialog

    dlg = QuantizeDialog(src, page)
    qtbot.addWidget(dlg)
    dlg.type_box.setCurrentText("Q8_0")
    assert dlg.name_edit.text() == "tiny-Q8_0.gguf"
    with qtbot.waitSignal(dlg.finished_ok, timeout=60000) as sig:
        dlg.start_btn.click()
    out = Path(sig.args[0])
    assert out.exists() and dlg.progress.value() == 1000
    entry = library.find(out)
    assert entry is not None and entry.quant == "Q8_0" and entry.provenance["source"] == "quantize"


def test_import_file_copy_and_link(page: Any, qtbot: Any, tmp_path: Path) -> None:
    a = write_synthetic_gguf(tmp_path / "outside-a.gguf", n_layers=1)
    b = write_synthetic_gguf(tmp_path / "outside-b.gguf", n_layers=1, seed=2)
    page.import_file(str(a))
    page.import_file(str(b), link=True)
    qtbot.waitUntil(lambda: sum(m.source == "imported" for m in page.library_model.rows) == 2, timeout=10000)
    by_name = {m.path.name: m for m in page.library_model.rows}
    assert not by_name["outside-a.gguf"].path.is_symlink() and by_name["outside-b.gguf"].path.is_symlink()
    assert "imported" in page.status.text()


def test_downloading_a_variant_that_wont_fit_asks_first(page: Any, qtbot: Any, hub_server: HubServer,
                                                        tmp_path: Path) -> None:
    big = write_header_only(tmp_path / "70b.gguf", "Q8_0", n_layers=80, n_embd=8192, n_ff=28672, n_head=64,
                            n_head_kv=8)  # ~70 GB: more than this machine's memory
    hub_server.state.add_repo("acme/Huge-GGUF", {"Huge-Q8_0.gguf": big}, fake_sha=True)
    page.open_repo("acme/Huge-GGUF")
    qtbot.waitUntil(lambda: _assessed(page), timeout=20000)
    (row,) = page.variant_model.rows
    assert row.verdict == "won't fit" and not row.recommended and row.decode_tps is None
    assert "needs" in row.note
    asked: list[str] = []
    page.confirm_unfit = lambda v: asked.append(v.quant) or False
    page.variant_view.selectRow(0)
    assert page.download_selected() is None and asked == ["Q8_0"]
    assert page.downloads_model.rowCount() == 0
