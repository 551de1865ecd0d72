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
4. prints the ratios as a Markdown table, a row as each load is done (commit it dated to docs/bench/ whenever a
   GPU machine is at hand). `--models`, `--levels` and `-p 16,64` narrow or widen a run (a prompt of 32 tokens or
   more runs on the device even at n_gpu_layers 0); `--json FILE` also keeps the rows, the rates and each row's
   config, so a prediction can be recomputed from the same measurements.
Everything is kept in a temporary ROOFLINE_HOME: the user's caches are not touched.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from dataclasses import asdict, replace
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


def check(repetitions: int, prompts: list[int], n_gen: int, models: list[str], levels: list[str],
          json_path: str = "") -> int:
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
    rows: list[dict[str, Any]] = []
    head = " | ".join(f"pp{p} pred/meas" for p in prompts)
    print(f"\n| model | ngl | device memory est/llama.cpp (MiB) | {head} | tg{n_gen} pred/meas |")
    print("| --- | --- | --- | " + " | ".join("---" for _ in prompts) + " | --- |", flush=True)
    with tempfile.TemporaryDirectory(prefix="roofline-gpu-check-") as tmp, EngineClient() as engine:
        for key, quant, few in MODELS:
            if models and key not in models:
                continue
            spec = replace(ZOO[key], key=f"{key}-{few}l", n_layers=few) if software else ZOO[key]
            path = fill_weights(write_zoo_model(spec, quant, Path(tmp) / f"{spec.key}-{quant}.gguf"))
            info = inspect_gguf(path)
            n = info.n_layers
            chosen = {"0": 0, "half": n // 2, "all": n + 1}
            for ngl in sorted({chosen[level] for level in levels}):
                cfg = _config(info, 2048, "f16", ngl, gpu=gpu)
                est = estimate_memory(info, cfg)
                loaded = engine.load(P.LoadConfig(model_path=str(path), n_ctx=2048, n_gpu_layers=ngl))
                on_device = sum(mib for k, mib in loaded.buffers_mib.items() if k.endswith(":" + gpu.device))
                row: dict[str, Any] = {"model": f"{spec.name} {quant}", "zoo": key, "quant": quant, "layers": n,
                                       "ngl": ngl, "config": asdict(cfg), "memory_est_mib": est.gpu.total / MiB,
                                       "memory_mib": on_device, "prefill": {}}
                for pp, tg in [(p, 0) for p in prompts] + [(0, n_gen)]:
                    res = engine.bench(P.Bench(request_id=engine.new_request_id("g"), n_prompt=pp, n_gen=tg,
                                               repetitions=repetitions))
                    meas = sum((pp or tg) / (ns / 1e9) for ns in res.samples_ns) / len(res.samples_ns)
                    pred = predict(info, rates, cfg, n_prompt=pp or 512, n_gen=n_gen)
                    if pp:
                        row["prefill"][pp] = (pred.prefill_tps, meas)
                    else:
                        row["decode"] = (pred.decode_tps, meas)
                rows.append(row)
                print_row(row, prompts)
                if json_path:  # the inputs too (the rates, each row's config): a prediction can be recomputed
                    Path(json_path).write_text(json.dumps({"rates": rates.to_dict(), "n_gen": n_gen, "rows": rows},
                                                          default=sorted, indent=1))
    return 0


def print_row(row: dict[str, Any], prompts: list[int]) -> None:
    m_p, m_m = row["memory_est_mib"], row["memory_mib"]
    mem = f"{m_p:.0f} / {m_m:.0f} ({m_p / m_m:.3f})" if m_m else f"{m_p:.0f} / 0"
    cells = [f"{a:.3g} / {b:.3g} ({a / b:.2f})" for a, b in [row["prefill"][p] for p in prompts] + [row["decode"]]]
    print(f"| {row['model']} | {row['ngl']} | {mem} | " + " | ".join(cells) + " |", flush=True)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-r", "--repetitions", type=int, default=2)
    ap.add_argument("-p", "--n-prompt", default="",
                    help="prompt tokens, a comma list (default: 512, 16 on llvmpipe; 32 and more: llama.cpp gives a "
                         "prompt's products to the device even at n_gpu_layers 0)")
    ap.add_argument("--models", default="", help="zoo keys, a comma list (default: " +
                    ",".join(m[0] for m in MODELS) + ")")
    ap.add_argument("--levels", default="0,half,all", help="offload levels: 0, half, all (default: all three)")
    ap.add_argument("--json", default="", help="also write the rows, the rates and each row's config to this file")
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
        try:
            prompts = [int(p) for p in args.n_prompt.split(",") if p] or [16 if software else 512]
        except ValueError:
            print(f"--n-prompt: comma-separated token counts, not {args.n_prompt!r}")
            return 2
        levels = [lv for lv in args.levels.split(",") if lv]
        models = [m for m in args.models.split(",") if m]
        bad = [lv for lv in levels if lv not in ("0", "half", "all")] + [m for m in models
                                                                          if m not in {k for k, _, _ in MODELS}]
        if bad or not levels or min(prompts) < 1:
            print(f"unknown or empty: {', '.join(bad) or 'levels/prompts'} (levels: 0, half, all; models: "
                  + ", ".join(k for k, _, _ in MODELS) + ")")
            return 2
        n_gen = args.n_gen or (4 if software else 128)
        return check(args.repetitions, prompts, n_gen, models, levels, args.json)
    finally:
        shutil.rmtree(home, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
