"""The measured GPU roofs against real full-offload runs (run it through scripts/bench_gpu_probe); prints ratios.

1. measures a GPU device through ggml (`python -m app.engine.llama.device_probe`, as `roofline hw --remeasure`
   does): matrix-vector bandwidth per weight type, device copy, F16 matrix multiply, a graph node's cost;
   before and after each model's run (the mean of the two counts: a device on a shared CPU drifts with the load);
2. measures `roofline bench -ngl 99` on zoo models of real shapes (random weights, as real files have: zeros
   run some kernels faster);
3. predicts each model's decode (tgN) and prompt (ppN) speed at full offload from the probe's figures alone
   (uncalibrated: `default_rates` with the measured device), for the placement llama.cpp chose (its model buffer
   on the device, read through the engine: a device may keep a too-large output matrix in RAM; the script then
   times that matrix at the CPU's rates);
4. prints predicted/measured ratios.
On a machine without a GPU the device is Mesa's llvmpipe, a Vulkan device that runs on the CPU: the script sets
GGML_VK_VISIBLE_DEVICES=0 for its children unless told otherwise (`--vk-devices ''`). llvmpipe is slow: the
defaults keep the runs short (a 32-token prompt, 8 generated tokens). Everything is kept in a temporary
ROOFLINE_HOME: the user's caches are not touched.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from app.core.predict.device_bandwidth import DeviceBandwidth  # noqa: E402  (after the path is set)

MODELS = ["qwen2.5-0.5b:Q8_0", "kernel-probe-4:Q4_0"]  # kernel-probe-N: Llama-3.2-1B's width, N layers


def average(a: DeviceBandwidth, b: DeviceBandwidth) -> DeviceBandwidth:
    """The mean of two probes of one device (figure by figure)."""
    return dataclasses.replace(
        a, read_gbs=(a.read_gbs + b.read_gbs) / 2, copy_gbs=(a.copy_gbs + b.copy_gbs) / 2,
        gemm_gflops=(a.gemm_gflops + b.gemm_gflops) / 2, node_us=(a.node_us + b.node_us) / 2,
        matvec_gbs={t: (g + b.matvec_gbs.get(t, g)) / 2 for t, g in a.matvec_gbs.items()})


def device_weights_mib(path: Path, device: str) -> float:
    """MiB of the model's weights llama.cpp put on `device` at -ngl 99 (its own buffer log, through the engine)."""
    from app.engine import protocol as P
    from app.engine.client import EngineClient

    with EngineClient() as engine:
        loaded = engine.load(P.LoadConfig(model_path=str(path), n_ctx=256, n_gpu_layers=99))
    return float(loaded.buffers_mib.get(f"model:{device}", 0.0))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default=None, help="llama.cpp device name (default: the first GPU device)")
    ap.add_argument("--vk-devices", default="0", help="GGML_VK_VISIBLE_DEVICES for the children ('' : unset)")
    ap.add_argument("--models", nargs="*", default=MODELS, help="zoo key:QUANT (or kernel-probe-LAYERS:QUANT)")
    ap.add_argument("-p", "--n-prompt", type=int, default=32)
    ap.add_argument("-n", "--n-gen", type=int, default=8)
    ap.add_argument("-r", "--repetitions", type=int, default=2)
    ap.add_argument("--zero-weights", action="store_true", help="bench the sparse zero-weight files instead")
    args = ap.parse_args()

    home = tempfile.mkdtemp(prefix="roofline-bench-gpu-")
    os.environ["ROOFLINE_HOME"] = home
    if args.vk_devices:
        os.environ["GGML_VK_VISIBLE_DEVICES"] = args.vk_devices  # this script's children: the probe, the engine

    from app.core.bench.zoo import ZOO, kernel_probe, zoo_path
    from app.core.gguf.info import inspect_gguf
    from app.core.predict import device_bandwidth
    from app.core.predict.bandwidth import get_bandwidth
    from app.core.predict.hardware import probe_hardware
    from app.core.predict.memory import MemoryConfig
    from app.core.predict.speed import default_rates, predict
    from app.engine import device_probe_client as client

    t_start = time.perf_counter()
    hw = probe_hardware()
    load = os.getloadavg()[0]
    print(f"machine: {hw.cpu.model}, {hw.cpu.physical_cores} cores, load average {load:.1f}")
    if load > (hw.cpu.logical_cores or 1):
        print("WARNING: the machine is busy (load average above the core count): timings are unreliable")
    # a device named on the command line may be any (the CPU's, to check the method where no GPU is there)
    devices = [d for d in client.list_devices() if (d.name == args.device if args.device else d.offloads)]
    if not devices:
        print(f"no {args.device or 'GPU'} device visible to llama.cpp (a CPU-only build, or "
              "GGML_VK_VISIBLE_DEVICES unset)")
        return 1
    dev = devices[0]
    def probe() -> DeviceBandwidth:
        m = device_bandwidth.get_device_bandwidth(
            hw.machine_key, dev.name, dev.description, device_bandwidth.installed_llama_version(),
            client.measure_device, remeasure=True)
        per_type = ", ".join(f"{t} {g:.3g}" for t, g in m.matvec_gbs.items())
        print(f"  probe of {m.device} ({m.description}, {m.backend}), {m.seconds:.1f} s, "
              f"{m.matrix_bytes >> 20} MiB matrix: matrix-vector {m.read_gbs:.3g} GB/s best ({per_type}); copy "
              f"{m.copy_gbs:.3g} GB/s; F16 matrix multiply {m.gemm_gflops:.3g} GFLOP/s; {m.node_us:.3g} us a node",
              flush=True)
        return m

    bw = get_bandwidth(hw.machine_key)

    zoo_dir = Path(home) / "zoo"
    rows = []
    for name in args.models:
        key, quant = name.split(":")
        spec = kernel_probe(int(key.rsplit("-", 1)[1])) if key.startswith("kernel-probe-") else ZOO[key]
        path = zoo_path(spec, quant, zoo_dir, random_weights=not args.zero_weights)
        info = inspect_gguf(path)
        before = probe()  # a device that runs on a shared CPU drifts with the load: probed around each run
        cmd = [sys.executable, "-m", "app.cli", "bench", "-m", str(path), "-p", str(args.n_prompt),
               "-n", str(args.n_gen), "-r", str(args.repetitions), "-ngl", "99", "--json"]
        t = time.perf_counter()
        done = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=1800, check=False)
        if done.returncode != 0:
            print(f"{spec.name} {quant}: roofline bench failed: {(done.stderr.strip().splitlines() or ['?'])[-1]}")
            continue
        after = probe()
        measured = average(before, after)
        rates = default_rates(hw, bw, device=measured)
        assert rates.gpu is not None
        print(f"  rates.gpu: {rates.gpu.bandwidth_gbs:.3g} GB/s x eta {rates.gpu.efficiency}, "
              f"{rates.gpu.t_layer_s * 1e3:.3g} ms a layer; source: {rates.gpu.source}")
        full = predict(info, rates, MemoryConfig(n_gpu_layers=99, n_ctx=256), depth=0, n_prompt=args.n_prompt,
                       n_gen=args.n_gen)
        bench = json.loads(done.stdout)
        pp = next(r["avg_ts"] for r in bench if r["n_prompt"] and not r["n_gen"])
        tg = next(r["avg_ts"] for r in bench if r["n_gen"] and not r["n_prompt"])
        # where llama.cpp really put the weights: a device may refuse a tensor (llvmpipe a matrix over its 128 MiB
        # storage-buffer range) and the output matrix then stays in RAM, which the speed model's layout does not
        # know: its decode time is moved from the device's rates to the CPU's here
        on_device = device_weights_mib(path, dev.name) * 2**20
        out = next(t for t in info.tensors if t.name == ("token_embd.weight" if info.tied_output else "output.weight"))
        gpu_bytes = full.bytes_per_token_by_device["gpu"]
        decode_s, where = full.decode_s_per_token, "all on the device"
        if on_device < gpu_bytes - out.n_bytes / 2:
            g, c = rates.gpu, rates.cpu
            t_dev = max(out.n_bytes / g.effective_bandwidth, out.n_elements / (g.decode_rate(out.ggml_type) or 1e30))
            t_cpu = max(out.n_bytes / c.effective_bandwidth, out.n_elements / (c.decode_rate(out.ggml_type) or 1e30))
            decode_s, where = decode_s - t_dev + t_cpu, "the output matrix in RAM"
            gpu_bytes -= out.n_bytes
        rows.append((f"{spec.name} {quant} ({where})", gpu_bytes, 1 / decode_s, tg, full.prefill_tps, pp))
        print(f"{spec.name} {quant}: llama.cpp's {dev.name} model buffer {on_device / 1e6:.0f} MB: {where}; "
              f"{gpu_bytes / 1e6:.0f} MB a token on the device, decode {full.decode_bound}; as if all were on the "
              f"device: tg {full.decode_tps:.3g} (ratio {full.decode_tps / tg:.2f}); "
              f"bench {time.perf_counter() - t:.0f} s", flush=True)

    print()
    print(f"| model | bytes/token | tg{args.n_gen} predicted | measured | ratio | "
          f"pp{args.n_prompt} predicted | measured | ratio |")
    print("|---|---|---|---|---|---|---|---|")
    for label, nbytes, ptg, mtg, ppp, mpp in rows:
        print(f"| {label} | {nbytes / 1e6:.0f} MB | {ptg:.2f} | {mtg:.2f} | {ptg / mtg:.2f} | {ppp:.1f} | {mpp:.1f} | "
              f"{ppp / mpp:.2f} |")
    worst = max((abs(r[2] / r[3] - 1) for r in rows), default=0.0)
    print(f"\nworst decode error: {100 * worst:.0f} % (target: within 20 %); "
          f"total {time.perf_counter() - t_start:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
