"""The speed model's rules for the CPU side of a load with a GPU device in use (app.core.predict.host_offload),
against llama.cpp itself on a real device (Mesa's llvmpipe in CI): at n_gpu_layers 0 the weights sit in the
device's host buffer with no repacked copy, and the scheduler's own assignment (GGML_SCHED_DEBUG) puts a weight's
product on the device from a 32-token micro-batch on and leaves a 31-token one, and the one-token output
product, on the CPU. No timing: which device runs what, as llama.cpp logs it."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from app.core.bench.zoo import ZOO, write_zoo_model
from app.core.predict.host_offload import offloaded_share, unrepacked_types
from app.core.predict.memory import MemoryConfig
from vulkan_device import LOG_PRELUDE, buffers, gpu_device, gpu_env

pytestmark = pytest.mark.gpu
# ggml_backend_sched_print_assignments: "node #  7 (   MUL_MAT):               Qcur-0 (  56K) [Vulka    1.off] ..."
NODE = re.compile(r"node #\s*\d+ \(\s*MUL_MAT\):\s*(\S+) \(\s*[^)]*\) \[\s*(\S+)\s*(\S*)\s*\]")
REPACKED = re.compile(r"repack: repack tensor (\S+) with")

_SCRIPT = LOG_PRELUDE + """
llm = llama_cpp.Llama(model_path=sys.argv[1], n_ctx=512, n_batch=512, n_ubatch=512, n_gpu_layers=0,
                      use_mmap=False, verbose=False)
out = {"load": "".join(lines)}
for n in (31, 32) if sys.argv[2] else ():
    del lines[:]
    llm.eval([300 + i for i in range(n)])
    out[str(n)] = "".join(lines)
llm.close()
print(json.dumps(out))
"""


def _child(path: Path, env: dict[str, str], evaluate: bool) -> dict[str, str]:
    done = subprocess.run([sys.executable, "-c", _SCRIPT, str(path), "1" if evaluate else ""], env=env,
                          capture_output=True, text=True, timeout=600, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, Any], dict[str, str], dict[str, str]]:
    """(the device, llama.cpp's logs with it: the load, a 31- and a 32-token batch; the load's log without it)."""
    device = gpu_device()
    spec = replace(ZOO["qwen2.5-0.5b"], key="qwen2.5-0.5b-2l", n_layers=2)
    path = write_zoo_model(spec, "Q4_K_M", tmp_path_factory.mktemp("zoo") / "q.gguf", uniform="Q4_0")
    with_device = _child(path, gpu_env() | {"GGML_SCHED_DEBUG": "2"}, evaluate=True)
    hidden = {"GGML_VK_VISIBLE_DEVICES": "", "CUDA_VISIBLE_DEVICES": ""}  # the same build, no device to use
    return device, with_device, _child(path, gpu_env() | hidden, evaluate=False)


def _products(log: str) -> dict[str, str]:
    """{matrix product's name: the backend it ran on (5 letters, as the log cuts it)} of one graph."""
    return {name: backend for name, backend, _cause in NODE.findall(log)}


def test_cpu_weights_sit_unrepacked_in_the_device_host_buffer(run: tuple[dict[str, Any], dict[str, str],
                                                                          dict[str, str]]) -> None:
    device, logs, alone = run
    assert buffers(logs["load"]).get((f"{device['backend']}_Host", "model"), 0.0) > 0  # the layers' weights
    layers_repacked = {n for n in REPACKED.findall(alone["load"]) if n.startswith("blk.")}
    assert layers_repacked  # without a device this CPU repacks the layers' Q4_0 matrices...
    assert not {n for n in REPACKED.findall(logs["load"]) if n.startswith("blk.")}  # ...beside one, none
    # the speed model prices them at the plain kernels' rates beside a device, and only there
    cfg = MemoryConfig(n_ctx=512, gpu_present=True)
    assert "Q4_0" in unrepacked_types(cfg, has_gpu=True)
    assert unrepacked_types(cfg, has_gpu=False) == frozenset()


def test_the_device_takes_a_micro_batch_from_32_tokens(run: tuple[dict[str, Any], dict[str, str],
                                                                   dict[str, str]]) -> None:
    device, logs, _ = run
    short, big = _products(logs["31"]), _products(logs["32"])
    on_device = device["name"][:5]
    assert short and set(short.values()) == {"CPU"}, short  # 31 tokens: every product stays with its weights
    first_block = {n: b for n, b in big.items() if n.endswith("-0")}
    assert {"Qcur-0", "ffn_up-0", "ffn_out-0"} <= set(first_block), big
    assert set(first_block.values()) == {on_device}, big  # 32 tokens: a host layer's products on the device
    assert big["result_output"] == "CPU"  # the last token's logits: a one-row product stays
    cfg = MemoryConfig(n_ctx=512, n_batch=512, n_ubatch=512, gpu_present=True)
    assert offloaded_share(31, cfg, has_gpu=True) == (0, 0)
    assert offloaded_share(32, cfg, has_gpu=True) == (32, 1)
