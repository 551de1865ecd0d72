"""Memory estimates against llama.cpp's own buffers on the zoo: every model (full size where RAM allows, else its
first few layers), KV f16/q8_0/q4_0, weights read in and mapped. Prints a Markdown table of the ratios
(estimate / llama.cpp) for docs/estimates.md.

    python scripts/memory_zoo.py [--models gpt-oss-20b lfm2-1.2b ...] [--layers N] [--ctx 4096]

Sparse zoo files only (a few MB on disk each, in a temporary folder); a load takes the model's whole size in RAM
(read in) or page cache plus the repacked copy (mapped), so a model is cut to --layers when its estimate is more
than --ram-share of the memory available.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

KV_TYPES = ("f16", "q8_0", "q4_0")


def main() -> int:
    import psutil

    from app.core.bench.zoo import ZOO, write_zoo_model
    from app.core.gguf.info import inspect_gguf
    from app.core.predict.memory import MemoryConfig, MiB, estimate_memory
    from app.engine import protocol as P
    from app.engine.client import EngineClient

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--models", nargs="*", default=list(ZOO), choices=list(ZOO))
    ap.add_argument("--layers", type=int, default=4, help="layers kept of a model too big to load whole")
    ap.add_argument("--ctx", type=int, default=4096)
    ap.add_argument("--ram-share", type=float, default=0.5)
    args = ap.parse_args()

    print("| model | layers | KV | weights | estimate MiB | llama.cpp MiB | ratio | repack est / llama "
          "| RS est / llama |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    worst = 1.0
    with tempfile.TemporaryDirectory() as tmp, EngineClient() as engine:
        for key in args.models:
            spec = ZOO[key]
            path = write_zoo_model(spec, spec.release, Path(tmp))
            info = inspect_gguf(path)
            whole = estimate_memory(info, MemoryConfig(n_ctx=args.ctx), has_gpu=False)
            if whole.cpu.total > args.ram_share * psutil.virtual_memory().available:
                path.unlink()
                spec = dataclasses.replace(spec, key=f"{key}-{args.layers}l", n_layers=args.layers)
                path = write_zoo_model(spec, spec.release, Path(tmp))
                info = inspect_gguf(path)
            for kv in KV_TYPES:
                for mmap in (False, True):
                    loaded = engine.load(P.LoadConfig(model_path=str(path), n_ctx=args.ctx, n_threads=2, type_k=kv,
                                                      type_v=kv, use_mmap=mmap, warmup=False))
                    cfg = MemoryConfig(n_ctx=args.ctx, type_k=kv, type_v=kv, use_mmap=mmap,
                                       flash_attn=loaded.flash_attn)
                    est = estimate_memory(info, cfg, has_gpu=False)
                    got = loaded.buffers_mib
                    total = sum(got.values())
                    ratio = est.cpu.total / MiB / total
                    worst = max(worst, ratio, 1 / ratio)
                    repack = sum(v for k, v in got.items() if "REPACK" in k)
                    rs = sum(v for k, v in got.items() if k.startswith("RS:"))
                    print(f"| {spec.name} {spec.release} | {spec.n_layers} | {kv} | {'mapped' if mmap else 'read in'} "
                          f"| {est.cpu.total / MiB:.1f} | {total:.1f} | {ratio:.4f} "
                          f"| {est.cpu.repack / MiB:.1f} / {repack:.1f} | {est.cpu.state / MiB:.2f} / {rs:.2f} |",
                          flush=True)
            path.unlink()
    print(f"\nworst ratio: {worst:.4f}", file=sys.stderr)
    return 0 if worst <= 1.02 else 1


if __name__ == "__main__":
    raise SystemExit(main())
