"""Check the memory and speed predictions on whatever GPU llama.cpp can use here (run it through scripts/gpu_check).

1. asks the installed llama.cpp which devices it sees (Vulkan, CUDA, Metal, ROCm). Without a GPU the device is
   Mesa's llvmpipe (a Vulkan device on the CPU), which llama.cpp uses only when GGML_VK_VISIBLE_DEVICES names
   it: the script sets GGML_VK_VISIBLE_DEVICES=0 for itself unless told otherwise (`--vk-devices ''`). On an
   NVIDIA machine whose build has no GPU backend it builds one into `.venv-cuda` (scripts/_setup.sh with
   ROOFLINE_CUDA=1, once) and runs itself there;
2. measures the device through ggml (bandwidth, compute, a graph node's cost: app.engine.llama.device_probe);
3. loads zoo models (sparse GGUFs of real shapes; on a software device fewer blocks) at no layer, half and every
   layer on the device, and compares the memory estimate per device with llama.cpp's own buffer sizes, and the
   speed model (uncalibrated, from the device's measured figures) with the engine's llama-bench-style runs;
4. prints the ratios as a Markdown table (commit it dated to docs/bench/ whenever a GPU machine is at hand).
Everything is kept in a temporary ROOFLINE_HOME: the user's caches are not touched.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
from dataclasses import replace
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
# (zoo key, quantization, blocks on a software device: its memory and speed are small)
MODELS = [("llama-3.2-1b", "Q4_K_M", 4), ("qwen2.5-7b", "Q4_K_M", 2), ("olmoe-1b-7b", "Q4_0", 4),
          ("gemma-2-2b", "Q4_K_M", 4)]
GiB = 1 << 30


def nvidia_present() -> bool:
    smi = shutil.which("nvidia-smi")
    return bool(smi) and subprocess.run([str(smi), "-L"], capture_output=True, check=False).returncode == 0


def offload_device() -> Any:
    from app.engine.device_query import query_devices

    devices = query_devices() or []
    return next((d for d in devices if d.offloads), None)


def cuda_venv() -> Path:
    """`.venv-cuda` with llama-cpp-python built for CUDA by the same set-up as `.venv` (once; many minutes)."""
    venv = ROOT / ".venv-cuda"
    env = dict(os.environ, ROOFLINE_VENV=str(venv), ROOFLINE_CUDA="1", ROOFLINE_VULKAN="0")
    subprocess.run(["bash", str(ROOT / "scripts" / "_setup.sh"), "[test]"], env=env, check=True)
    return venv / "bin" / "python"


def check(repetitions: int, n_prompt: int, n_gen: int) -> int:
    from app.core.bench.zoo import ZOO, fill_weights, write_zoo_model
    from app.core.gguf.info import inspect_gguf
    from app.core.predict.device_bandwidth import get_device_bandwidth, installed_llama_version
    from app.core.predict.memory import MiB, estimate_memory
    from app.core.predict.rates import measured_gpu_rates
    from app.core.predict.recommend import Machine, _config, memory_budget
    from app.core.predict.speed import Rates, predict
    from app.engine import protocol as P
    from app.engine.client import EngineClient
    from app.engine.device_probe_client import measure_device
    from app.engine.device_query import query_devices

    machine = Machine.from_system(llama_devices=query_devices())
    gpu = memory_budget(machine.hw, machine.vram_limit).gpu
    if gpu is None:
        print("llama.cpp sees a GPU but the planner has none to plan for (see `roofline hw`)")
        return 1
    probed = get_device_bandwidth(machine.hw.machine_key, gpu.device, gpu.name, installed_llama_version(),
                                  measure_device)
    rates = Rates(machine.rates.cpu, measured_gpu_rates(probed))
    software = "llvmpipe" in gpu.name or (gpu.memory_total or 0) < 4 * GiB
    print(f"device: {gpu.device} = {gpu.name}, {(gpu.memory_total or 0) / GiB:.1f} GiB; measured "
          f"{probed.read_gbs:.3g} GB/s matrix-vector, {probed.gemm_gflops:.3g} GFLOP/s"
          + (" (a software device: zoo models with fewer blocks)" if software else ""))
    rows = []
    with tempfile.TemporaryDirectory(prefix="roofline-gpu-check-") as tmp, EngineClient() as engine:
        for key, quant, few in MODELS:
            spec = replace(ZOO[key], key=f"{key}-{few}l", n_layers=few) if software else ZOO[key]
            path = fill_weights(write_zoo_model(spec, quant, Path(tmp) / f"{spec.key}-{quant}.gguf"))
            info = inspect_gguf(path)
            n = info.n_layers
            for ngl in sorted({0, n // 2, n + 1}):
                cfg = _config(info, 2048, "f16", ngl, gpu=gpu)
                est = estimate_memory(info, cfg)
                loaded = engine.load(P.LoadConfig(model_path=str(path), n_ctx=2048, n_gpu_layers=ngl))
                on_device = sum(mib for k, mib in loaded.buffers_mib.items() if k.endswith(":" + gpu.device))
                pred = predict(info, rates, cfg, n_prompt=n_prompt, n_gen=n_gen)
                meas = {}
                for pp, tg in ((n_prompt, 0), (0, n_gen)):
                    res = engine.bench(P.Bench(request_id=engine.new_request_id("g"), n_prompt=pp, n_gen=tg,
                                               repetitions=repetitions))
                    meas[pp > 0] = sum((pp or tg) / (ns / 1e9) for ns in res.samples_ns) / len(res.samples_ns)
                rows.append((f"{spec.name} {quant}", ngl, est.gpu.total / MiB, on_device, pred.prefill_tps,
                             meas[True], pred.decode_tps, meas[False]))
    print(f"\n| model | ngl | device memory est/llama.cpp (MiB) | pp{n_prompt} pred/meas | tg{n_gen} pred/meas |")
    print("| --- | --- | --- | --- | --- |")
    for name, ngl, m_p, m_m, pp_p, pp_m, tg_p, tg_m in rows:
        mem = f"{m_p:.0f} / {m_m:.0f} ({m_p / m_m:.3f})" if m_m else f"{m_p:.0f} / 0"
        print(f"| {name} | {ngl} | {mem} | {pp_p:.3g} / {pp_m:.3g} ({pp_p / pp_m:.2f}) | "
              f"{tg_p:.3g} / {tg_m:.3g} ({tg_p / tg_m:.2f}) |")
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-r", "--repetitions", type=int, default=2)
    ap.add_argument("-p", "--n-prompt", type=int, default=0, help="prompt tokens (default: 512, 16 on llvmpipe)")
    ap.add_argument("-n", "--n-gen", type=int, default=0, help="generated tokens (default: 128, 4 on llvmpipe)")
    ap.add_argument("--vk-devices", default="0",
                    help="GGML_VK_VISIBLE_DEVICES when it is not set (default 0: llvmpipe too; '' for none)")
    ap.add_argument("--in-cuda-env", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if "GGML_VK_VISIBLE_DEVICES" not in os.environ and args.vk_devices:
        os.environ["GGML_VK_VISIBLE_DEVICES"] = args.vk_devices
    home = tempfile.mkdtemp(prefix="roofline-gpu-check-home-")
    os.environ["ROOFLINE_HOME"] = home
    try:
        device = offload_device()
        if device is None and nvidia_present() and not args.in_cuda_env:
            py = cuda_venv()
            return subprocess.run([str(py), __file__, "--in-cuda-env", *sys.argv[1:]], check=False).returncode
        if device is None:
            print("llama.cpp sees no GPU here (no GPU backend built, or none visible): nothing to check.")
            return 0
        software = "llvmpipe" in device.description
        n_prompt = args.n_prompt or (16 if software else 512)
        n_gen = args.n_gen or (4 if software else 128)
        return check(args.repetitions, n_prompt, n_gen)
    finally:
        shutil.rmtree(home, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
