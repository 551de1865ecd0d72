"""One measurement of the machine: the roofs the dashboard and the Lab draw come from the same stored record, and a
re-measure while the machine is busy does not replace a quiet one (Discover's pick stays what it was)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from app.core.bench.batch_roofline import batch_roofline
from app.core.gguf.info import inspect_gguf
from app.core.models.curated import assess_curated, best_pick
from app.core.models.fit import machine_for_library
from app.core.predict import bandwidth, hardware, machine_roofs
from app.core.predict.batching import predict_batch


def _key() -> str:
    return hardware.probe_hardware().machine_key


def _measured_as(monkeypatch: pytest.MonkeyPatch, quiet: bandwidth.BandwidthResult, **changes: object) -> None:
    monkeypatch.setattr(bandwidth, "measure_bandwidth",
                        lambda **_: dataclasses.replace(quiet, measured_at="2026-12-02T10:00:00+00:00", **changes))


def test_a_busy_remeasure_keeps_the_quiet_measurement_and_discovers_pick(monkeypatch: pytest.MonkeyPatch) -> None:
    key = _key()
    quiet = bandwidth.get_bandwidth(key)  # the recorded (quiet) figures, stored
    before = machine_for_library()
    pick = best_pick(assess_curated(before))
    _measured_as(monkeypatch, quiet, busy=True, read_gbs=quiet.read_gbs / 3, read_gbs_1t=quiet.read_gbs_1t / 3,
                 gemm_gflops=quiet.gemm_gflops / 3, gemm_gflops_1t=quiet.gemm_gflops_1t / 3)
    kept = bandwidth.get_bandwidth(key, remeasure=True)
    assert kept.read_gbs == quiet.read_gbs and not kept.busy
    assert kept.kept_over_busy == "2026-12-02T10:00:00+00:00"  # said, not silent
    stored = bandwidth.load_cached(key)
    assert stored is not None and stored.read_gbs == quiet.read_gbs and stored.measured_at == quiet.measured_at
    after = machine_for_library()
    assert after.rates.cpu.effective_bandwidth == before.rates.cpu.effective_bandwidth
    again = best_pick(assess_curated(after))
    assert (again.model.title if again else None) == (pick.model.title if pick else None)
    # a quiet re-measure does replace it
    _measured_as(monkeypatch, quiet, read_gbs=quiet.read_gbs * 1.5)
    assert bandwidth.get_bandwidth(key, remeasure=True).read_gbs == quiet.read_gbs * 1.5
    assert bandwidth.load_cached(key).read_gbs == quiet.read_gbs * 1.5  # type: ignore[union-attr]


def test_a_busy_measurement_is_kept_only_until_a_better_one(monkeypatch: pytest.MonkeyPatch) -> None:
    key = _key()
    first = bandwidth.get_bandwidth(key)
    bandwidth.store(dataclasses.replace(first, busy=True, read_gbs=5.0))
    _measured_as(monkeypatch, first, busy=True, read_gbs=7.0)
    better = bandwidth.get_bandwidth(key, remeasure=True)  # both busy: the better figures count
    assert better.busy and better.read_gbs == 7.0 and not better.kept_over_busy


def test_the_dashboard_and_the_lab_draw_the_same_roofs(default_model: Path) -> None:
    dashboard = machine_roofs.roofs_for_model(str(default_model), threads=2, measure=True)
    rates, measurement = machine_roofs.machine_figures(2)
    info = inspect_gguf(str(default_model))
    lab = batch_roofline(info, rates, predict_batch(info, rates, [1, 4]), {1: 10.0}, measurement)
    assert dashboard.bandwidth > 0 and dashboard.peak_flops > 0
    assert (lab.bandwidth, lab.peak_flops, lab.note) == (dashboard.bandwidth, dashboard.peak_flops, dashboard.note())
    assert measurement is not None and dashboard.measured_at == measurement.measured_at


def test_the_note_says_when_measured_and_whether_busy() -> None:
    roofs = machine_roofs.MachineRoofs(20e9, 150e9, 1, "2026-12-01T12:00:00+00:00", busy=True, calibrated=True)
    assert roofs.note() == "measured 2026-12-01, while busy: low · calibrated · 1 thread"
    assert roofs.ridge == pytest.approx(7.5) and roofs.roof(1.0) == 20e9 and roofs.roof(100.0) == 150e9
    assert machine_roofs.MachineRoofs(20e9, 0, 2, "", False, False).note() == "assumed: not measured yet · 2 threads"
