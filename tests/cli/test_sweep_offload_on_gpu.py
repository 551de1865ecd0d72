"""`roofline sweep offload` on a real Vulkan device: prefill and decode measured at each n_gpu_layers, and the
speed model's decode at the same values printed beside them (the Lab draws both)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from app.core.bench.zoo import kernel_probe, write_zoo_model
from vulkan_device import gpu_device, gpu_env

pytestmark = pytest.mark.gpu


def test_the_offload_sweep_measures_each_level_beside_the_prediction(tmp_path: Path, roofline_home: Path) -> None:
    gpu_device()
    # Llama-3.2-1B's width with 2 blocks and a 32k vocabulary: a few seconds a level even on llvmpipe
    model = write_zoo_model(kernel_probe(2), "Q4_0", tmp_path / "probe.gguf")
    out = tmp_path / "rows.json"
    env = gpu_env() | {"ROOFLINE_HOME": str(roofline_home)}
    done = subprocess.run([sys.executable, "-m", "app.cli", "sweep", "offload", "-m", str(model), "--layers", "0,3",
                           "-p", "16", "-n", "4", "-r", "1", "--json", str(out)], env=env, capture_output=True,
                          text=True, timeout=600, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    lines = done.stdout.splitlines()
    assert lines[0] == "n_gpu_layers,prefill_tps,decode_tps"
    measured = {int(line.split(",")[0]): float(line.split(",")[2]) for line in lines[1:3]}
    assert set(measured) == {0, 3} and all(v > 0 for v in measured.values())
    predicted = next(line for line in lines if line.startswith("predicted decode tok/s by n_gpu_layers: "))
    assert predicted.count(":") == 3  # the label's and one per level
    assert "Predicted decode at the most layers" in done.stdout
    rows = json.loads(out.read_text())
    assert len(rows) == 4 and {r["n_gpu_layers"] for r in rows} >= {0}
