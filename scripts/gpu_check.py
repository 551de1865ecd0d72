"""Check the speed and memory predictions on an NVIDIA GPU (run it through scripts/gpu_check).

1. finds an NVIDIA GPU through NVML (`nvidia-smi` as a fallback); without one it says so and exits 0;
2. makes sure llama-cpp-python is built with CUDA: in this environment if it already offloads, else in
   `.venv-cuda` (built once with CMAKE_ARGS=-DGGML_CUDA=on, then this script re-runs itself there);
3. writes zoo models (sparse GGUFs of real shapes) and loads each at several n_gpu_layers: none, half the
   layers, all but the output, everything;
4. prints predicted vs measured pp512 / tg128 tok/s and predicted vs NVML-reported VRAM (the engine process's
   own usage, or the device's used memory before and after loading), as ratios.
The predictions are uncalibrated (spec bandwidth, published efficiencies): this is what a new user sees.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
MODELS = [("llama-3.2-1b", "Q4_K_M"), ("qwen2.5-7b", "Q4_K_M"), ("llama-3.1-8b", "Q4_K_M"), ("olmoe-1b-7b", "Q4_K_M")]
LLAMA_VERSION = "0.3.36"


def nvidia_gpus() -> list[str]:
    try:
        import pynvml

        pynvml.nvmlInit()
        names = [str(pynvml.nvmlDeviceGetName(pynvml.nvmlDeviceGetHandleByIndex(i)))
                 for i in range(pynvml.nvmlDeviceGetCount())]
        pynvml.nvmlShutdown()
        return names
    except Exception:  # noqa: BLE001 - no NVML library, no driver, no device: all mean "no GPU here"
        pass
    smi = shutil.which("nvidia-smi")
    if smi:
        res = subprocess.run([smi, "--query-gpu=name", "--format=csv,noheader"], capture_output=True, text=True,
                             check=False)
        if res.returncode == 0:
            return [line.strip() for line in res.stdout.splitlines() if line.strip()]
    return []


def cuda_offload_here() -> bool:
    try:
        import llama_cpp

        return bool(llama_cpp.llama_supports_gpu_offload())
    except Exception:  # noqa: BLE001
        return False


def cuda_env() -> Path:
    """A venv with llama-cpp-python built for CUDA (built once; minutes)."""
    venv = ROOT / ".venv-cuda"
    py = venv / "bin" / "python"
    if not py.exists():
        subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", str(venv)], check=True)
    probe = "import llama_cpp, sys; sys.exit(0 if llama_cpp.llama_supports_gpu_offload() else 1)"
    ok = subprocess.run([str(py), "-c", probe], capture_output=True, check=False).returncode == 0
    if not ok:
        print("building llama-cpp-python with CUDA (once, several minutes) ...", flush=True)
        env = dict(os.environ, CMAKE_ARGS="-DGGML_CUDA=on", FORCE_CMAKE="1")
        subprocess.run([str(py), "-m", "pip", "install", "--no-cache-dir", "--force-reinstall", "--no-deps",
                        "--no-binary", "llama-cpp-python", f"llama-cpp-python=={LLAMA_VERSION}"], env=env, check=True)
    return py


def vram_used(pid: int | None) -> tuple[int | None, int]:
    """(bytes NVML attributes to `pid`, bytes used on device 0)."""
    import pynvml

    pynvml.nvmlInit()
    try:
        h = pynvml.nvmlDeviceGetHandleByIndex(0)
        used = int(pynvml.nvmlDeviceGetMemoryInfo(h).used)
        mine = None
        for proc in pynvml.nvmlDeviceGetComputeRunningProcesses(h):
            if proc.pid == pid and proc.usedGpuMemory:
                mine = int(proc.usedGpuMemory)
        return mine, used
    finally:
        pynvml.nvmlShutdown()


def check(repetitions: int) -> int:
    from app.core.bench.zoo import ZOO, zoo_path
    from app.core.gguf.info import inspect_gguf
    from app.core.predict.bandwidth import get_bandwidth
    from app.core.predict.hardware import probe_hardware
    from app.core.predict.memory import MemoryConfig, estimate_memory
    from app.core.predict.recommend import GPU_BACKEND_OVERHEAD
    from app.core.predict.speed import default_rates, predict
    from app.engine import protocol as P
    from app.engine.client import EngineClient

    hw = probe_hardware(gpu_offload=True)
    rates = default_rates(hw, get_bandwidth(hw.machine_key))
    gpu = hw.best_gpu
    print(f"GPU: {gpu.name if gpu else '?'}, {rates.gpu.bandwidth_gbs if rates.gpu else 0:.0f} GB/s spec")
    rows = []
    with tempfile.TemporaryDirectory(prefix="roofline-zoo-") as tmp, EngineClient() as engine:
        for key, quant in MODELS:
            path = zoo_path(key, quant, Path(tmp))
            info = inspect_gguf(path)
            n = info.n_layers
            for ngl in sorted({0, n // 2, n, n + 1}):
                cfg = MemoryConfig(n_ctx=4096, n_gpu_layers=ngl)
                est = estimate_memory(info, cfg)
                _, used0 = vram_used(None)
                engine.load(P.LoadConfig(model_path=str(path), n_ctx=4096, n_gpu_layers=ngl))
                mine, used1 = vram_used(engine.pid)
                vram = mine if mine is not None else used1 - used0
                pred = predict(info, rates, cfg, n_prompt=512, n_gen=128)
                meas = {}
                for n_prompt, n_gen in ((512, 0), (0, 128)):
                    res = engine.bench(P.Bench(request_id=engine.new_request_id("g"), n_prompt=n_prompt,
                                               n_gen=n_gen, repetitions=repetitions))
                    k = n_prompt or n_gen
                    meas[n_prompt > 0] = sum(k / (ns / 1e9) for ns in res.samples_ns) / len(res.samples_ns)
                vram_pred = est.gpu.total + (GPU_BACKEND_OVERHEAD["nvidia"] if ngl else 0)
                rows.append((f"{ZOO[key].name} {quant}", ngl, pred.prefill_tps, meas[True], pred.decode_tps,
                             meas[False], vram_pred, vram))
    print("\n| model | ngl | pp512 pred/meas | tg128 pred/meas | VRAM pred/NVML (MiB) |")
    print("| --- | --- | --- | --- | --- |")
    for name, ngl, pp_p, pp_m, tg_p, tg_m, v_p, v_m in rows:
        vr = f"{v_p / 2**20:.0f} / {v_m / 2**20:.0f} ({v_p / v_m:.2f}x)" if v_m > 0 else f"{v_p / 2**20:.0f} / -"
        print(f"| {name} | {ngl} | {pp_p:.0f} / {pp_m:.0f} ({pp_p / pp_m:.2f}x) | "
              f"{tg_p:.1f} / {tg_m:.1f} ({tg_p / tg_m:.2f}x) | {vr} |")
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-r", "--repetitions", type=int, default=3)
    ap.add_argument("--in-cuda-env", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    gpus = nvidia_gpus()
    if not gpus:
        print("no NVIDIA GPU found (no NVML, no nvidia-smi device): nothing to check on this machine.")
        return 0
    print(f"NVIDIA GPU(s): {', '.join(gpus)}")
    if not args.in_cuda_env and not cuda_offload_here():
        py = cuda_env()
        env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
        return subprocess.run([str(py), __file__, "--in-cuda-env", "-r", str(args.repetitions)], env=env,
                              check=False).returncode
    return check(args.repetitions)


if __name__ == "__main__":
    sys.exit(main())
