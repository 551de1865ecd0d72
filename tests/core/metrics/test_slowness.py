""""Why is it slow?": the decision from a reply's evidence to the one cause line (app.core.metrics.slowness)."""

from __future__ import annotations

import pytest

from app.core.metrics.evidence import Evidence, Snapshot, between, gpu_free_share, offloaded_layers
from app.core.metrics.slowness import SLOW, causes, reply_slow_line, slow_line

GiB = 2**30


def calm(**changes: object) -> Evidence:
    ev = Evidence(wall_s=10.0, n_cpus=8, threads=4, other_cores=0.2, steal_cores=0.0, engine_cores=4.0,
                  major_faults=3, disk_read_bytes=0, freq_start_mhz=3400.0, freq_end_mhz=3300.0,
                  freq_max_mhz=3500.0, swap_in_bytes=0, gpu_layers_planned=-1, gpu_layers_offloaded=29,
                  gpu_layers_total=29, gpu_free_share=0.3, model_bytes=4 * GiB)
    for k, v in changes.items():
        setattr(ev, k, v)
    return ev


def test_not_slow_says_nothing() -> None:
    assert slow_line("decode", SLOW * 10 + 0.01, 10, calm(other_cores=7.0)) == ""
    assert slow_line("decode", 0.0, 10, calm()) == ""  # nothing measured
    assert slow_line("decode", 5.0, 0.0, calm()) == ""  # nothing predicted


def test_calm_machine_says_no_cause_found() -> None:
    assert causes(calm()) == []
    line = slow_line("decode", 3.0, 10.0, calm())
    assert line.startswith("decode 3 tok/s, 0.30× the prediction (10): no cause in the evidence")
    assert "no evidence was recorded" in slow_line("decode", 3.0, 10.0, None)


@pytest.mark.parametrize(("changes", "words"), [
    ({"other_cores": 5.5, "top_others": [("cc1plus", 3.0), ("chrome", 1.5)]},
     "other processes used 5.5 of 8 CPU cores during the reply (busiest: cc1plus 3.0, chrome 1.5)"),
    ({"disk_read_bytes": 3 * GiB}, "weights paged in from the mapped model file during the reply: 3.0 GiB read "
                                   "from disk (75% of the model)"),
    ({"major_faults": 5000}, "5000 major page faults"),
    ({"gpu_layers_offloaded": 20}, "only 20 of 29 layers are on the GPU (the plan was 29)"),
    ({"gpu_layers_planned": 24, "gpu_layers_offloaded": 12}, "only 12 of 29 layers are on the GPU (the plan was 24)"),
    ({"gpu_free_share": 0.004}, "GPU memory is full"),
    ({"freq_end_mhz": 1200.0}, "the CPU clock fell to 1.20 of 3.50 GHz"),
    ({"swap_in_bytes": GiB}, "the system swapped 1.0 GiB in during the reply"),
    ({"steal_cores": 3.0}, "the hypervisor took 3.0 of 8 CPU cores"),
])
def test_each_cause_is_named(changes: dict[str, object], words: str) -> None:
    line = slow_line("decode", 2.0, 10.0, calm(**changes))
    assert line.startswith("decode 2 tok/s, 0.20× the prediction (10): ")
    assert words in line


def test_planned_layers_that_all_loaded_are_not_a_cause() -> None:
    assert causes(calm(gpu_layers_planned=12, gpu_layers_offloaded=12)) == []
    assert causes(calm(gpu_layers_planned=0, gpu_layers_offloaded=0, gpu_free_share=0.0)) == []  # CPU only


def test_the_strongest_cause_wins_and_offload_beats_all() -> None:
    both = calm(other_cores=2.5, disk_read_bytes=2 * GiB)  # just past the load limit, far past the reads'
    assert causes(both)[0].line.startswith("weights paged in")
    assert causes(calm(other_cores=8.0, disk_read_bytes=4 * GiB, gpu_layers_offloaded=1))[0].line.startswith("only 1")


def test_a_reply_names_its_slower_phase() -> None:
    ev = calm(other_cores=6.0)
    line = reply_slow_line(8.0, 10.0, 100.0, 400.0, ev)  # decode 0.8× (fine), prefill 0.25×
    assert line.startswith("prefill 100 tok/s, 0.25× the prediction (400): other processes used 6.0")
    assert reply_slow_line(8.0, 10.0, 390.0, 400.0, ev) == ""


def test_evidence_round_trips_through_json_like_dicts() -> None:
    ev = calm(top_others=[("stress", 1.9)])
    data = ev.to_dict()
    data["top_others"] = [list(x) for x in data["top_others"]]  # what JSON makes of tuples
    data["unknown"] = 1
    assert Evidence.from_dict(data) == ev


def test_between_subtracts_the_engine_and_ranks_others() -> None:
    a = Snapshot(t=0.0, busy_s=100.0, steal_s=1.0, engine_cpu_s=10.0, processes={1: ("hog", 5.0), 2: ("x", 1.0)},
                 major_faults=10, read_bytes=0, freq_mhz=3000.0, freq_max_mhz=3500.0, swap_in_bytes=0)
    b = Snapshot(t=2.0, busy_s=110.0, steal_s=1.0, engine_cpu_s=14.0,
                 processes={1: ("hog", 8.8), 2: ("x", 1.0), 3: ("new", 50.0)},
                 major_faults=25, read_bytes=4096, freq_mhz=2000.0, freq_max_mhz=3500.0, swap_in_bytes=0)
    ev = between(a, b, threads=2, n_cpus=4)
    assert ev.engine_cores == pytest.approx(2.0) and ev.other_cores == pytest.approx(3.0)
    assert ev.top_others == [("hog", 1.9)]  # a process that started meanwhile has no delta to report
    assert (ev.major_faults, ev.disk_read_bytes, ev.freq_start_mhz, ev.freq_end_mhz) == (15, 4096, 3000.0, 2000.0)
    missing = between(Snapshot(0.0, None, None, None), Snapshot(1.0, None, None, None), n_cpus=2)
    assert missing.other_cores is None and causes(missing) == []


def test_llama_log_says_how_many_layers_it_offloaded() -> None:
    lines = ["load_tensors: offloading 12 repeating layers to GPU",
             "load_tensors: offloaded 12/29 layers to GPU", "llama_context: n_ctx = 4096"]
    assert offloaded_layers(lines) == (12, 29)
    assert offloaded_layers(["load_tensors: offloaded 3/29 layers to GPU", *lines]) == (12, 29)  # the last load's
    assert offloaded_layers(["nothing here"]) is None
    assert gpu_free_share([{"memory_total": 100, "memory_free": 30}, {"memory_total": 200, "memory_free": 10}]) == 0.05
    assert gpu_free_share([{"memory_total": 0, "memory_free": 0}]) is None


def _assigned(devices: list[str]) -> list[str]:
    return [f"load_tensors: layer {il:3d} assigned to device {dev}, is_swa = 0" for il, dev in enumerate(devices)]


def test_the_layers_llama_cpp_placed_count_not_the_summary_that_repeats_the_request() -> None:
    half = _assigned(["CPU"] * 17 + ["Vulkan0"] * 13) + ["load_tensors: offloaded 13/30 layers to GPU"]
    assert offloaded_layers(half) == (13, 30)
    # the summary is the request worked out, not the placement: the per-layer lines win over it
    assert offloaded_layers(_assigned(["CPU"] * 30) + ["load_tensors: offloaded 30/30 layers to GPU"]) == (0, 30)
    no_device = _assigned(["CPU"] * 30)  # a GPU build without a usable device prints no summary
    assert offloaded_layers(no_device) == (0, 30)
    assert offloaded_layers(no_device + half) == (13, 30)  # the last load's
    assert offloaded_layers(half + no_device) == (0, 30)
    ev = Evidence(wall_s=1.0, gpu_layers_planned=-1)
    ev.gpu_layers_offloaded, ev.gpu_layers_total = offloaded_layers(no_device)  # type: ignore[misc]
    assert causes(ev)[0].line.startswith("only 0 of 30 layers are on the GPU (the plan was 30)")
