""""Fewer GPU layers than the plan", induced on a real GPU build: the plan is every layer on the GPU, and the
Vulkan backend is left without a device (GGML_VK_VISIBLE_DEVICES empty: what a missing or skipped driver
looks like to llama.cpp), so every layer runs on the CPU. The load says so (Loaded's placement, from llama.cpp's
per-layer log lines), the reply's evidence counts the layers llama.cpp placed and the slowness line names them,
when a GPU is expected (a driver reports one, or the user set the layers); the layers on auto with none expected
say nothing. With the device visible, the same plan is met and nothing is said. Counters only: no assertion reads
a time."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from app.core.metrics.evidence import Evidence
from app.core.metrics.slowness import causes, gpu_shortfall
from app.engine import protocol as P
from app.engine.client import EngineClient
from engine_helpers import collect
from vulkan_device import gpu_device, gpu_env

pytestmark = [pytest.mark.gpu, pytest.mark.model]


def _reply_evidence(model: Path, env: dict[str, str], gpu_expected: bool = True,
                    ) -> tuple[P.Loaded, Evidence, list[str]]:
    with EngineClient(env=env) as client:
        loaded = client.load(P.LoadConfig(model_path=str(model), n_ctx=512, n_threads=2, n_gpu_layers=-1,
                                          gpu_expected=gpu_expected))
        _tokens, done = collect(client, P.Generate(
            request_id="g1", messages=[{"role": "user", "content": "Count to ten."}],
            sampling=P.Sampling(temperature=0.0, max_tokens=4, seed=1, ignore_eos=True)))
    ev = Evidence.from_dict(done.metrics["evidence"])
    return loaded, ev, [c.line for c in causes(ev)]


@pytest.fixture(scope="module")
def device() -> dict[str, Any]:
    return gpu_device()  # a GPU build and a device (skips, or fails under ROOFLINE_REQUIRE_GPU=1)


def test_a_plan_for_the_gpu_that_runs_on_the_cpu_is_named(default_model: Path, device: dict[str, Any]) -> None:
    loaded, ev, lines = _reply_evidence(default_model, dict(os.environ, GGML_VK_VISIBLE_DEVICES=""))
    assert (loaded.gpu_layers_requested, loaded.gpu_layers_placed) == (-1, 0)
    assert gpu_shortfall(loaded.gpu_layers_requested, loaded.gpu_layers_placed, loaded.gpu_layers_total)
    assert ev.gpu_layers_planned == -1
    assert ev.gpu_layers_total is not None and ev.gpu_layers_total > 1
    assert ev.gpu_layers_offloaded == 0
    assert lines and lines[0] == (f"only 0 of {ev.gpu_layers_total} layers are on the GPU (the plan was "
                                  f"{ev.gpu_layers_total}): the rest run on the CPU")


def test_auto_layers_without_a_gpu_expected_say_nothing(default_model: Path, device: dict[str, Any]) -> None:
    """The same build and hidden device, the layers on auto and no GPU driver here (the CPU-only user of a GPU
    build): "all" means all the build can, none; nothing is said at the load or as a cause."""
    loaded, ev, lines = _reply_evidence(default_model, dict(os.environ, GGML_VK_VISIBLE_DEVICES=""),
                                        gpu_expected=False)
    assert loaded.gpu_layers_requested == 0 and loaded.gpu_layers_placed == 0
    assert not gpu_shortfall(loaded.gpu_layers_requested, loaded.gpu_layers_placed, loaded.gpu_layers_total)
    assert ev.gpu_layers_planned == 0 and ev.gpu_layers_offloaded == 0
    assert not any(line.startswith("only ") for line in lines)


def test_the_same_plan_met_on_the_device_names_no_layers(default_model: Path, device: dict[str, Any]) -> None:
    loaded, ev, lines = _reply_evidence(default_model, gpu_env())
    assert loaded.gpu_layers_placed == loaded.gpu_layers_total
    assert not gpu_shortfall(loaded.gpu_layers_requested, loaded.gpu_layers_placed, loaded.gpu_layers_total)
    assert ev.gpu_layers_total is not None and ev.gpu_layers_offloaded == ev.gpu_layers_total
    assert not any(line.startswith("only ") for line in lines)
