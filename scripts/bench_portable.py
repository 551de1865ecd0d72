"""Benchmark: is the native llama.cpp build (scripts/run, scripts/test) faster than the portable one (the bundle)?

Both run through the same engine (`roofline bench`, llama-bench's pp/tg tests) on the same model and threads; the
portable build's libraries are the cached wheel's (scripts/_portable_wheel.sh), used through llama_cpp's
LLAMA_CPP_LIB_PATH override, so the Python side is identical. Rounds are interleaved (native, portable, native, …)
so a busy machine slows both alike; the answer is the per-round ratio portable/native and its median.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def portable_lib(dest: Path) -> Path:
    got = subprocess.run(["bash", str(ROOT / "scripts" / "_portable_wheel.sh"), "--cached"], capture_output=True,
                         text=True, check=False)
    if got.returncode != 0:
        raise SystemExit("bench_portable: the portable wheel is not built yet (scripts/package builds it)")
    with zipfile.ZipFile(got.stdout.strip().splitlines()[-1]) as z:
        z.extractall(dest, [n for n in z.namelist() if n.startswith("llama_cpp/lib/")])
    return dest / "llama_cpp" / "lib"


def bench(env_extra: dict[str, str], args: argparse.Namespace) -> dict[str, float]:
    cmd = [sys.executable, "-m", "app.cli", "bench", "-p", str(args.n_prompt), "-n", str(args.n_gen),
           "-r", str(args.repetitions), "-t", str(args.threads), "--json"]
    if args.model:
        cmd += ["-m", args.model]
    out = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, check=True,
                         env={**os.environ, "PYTHONPATH": str(ROOT), **env_extra})
    rows = json.loads(out.stdout)
    return {("pp" if r["n_prompt"] else "tg"): float(r["avg_ts"]) for r in rows}


def variant(env_extra: dict[str, str]) -> str:
    probe = ("from app.engine.llama.backends import cpu_backend, load_backends; load_backends(); "
             "print(cpu_backend().describe())")
    return subprocess.run([sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": str(ROOT), **env_extra}, check=False).stdout.strip()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("-m", "--model", help="GGUF (default: the default model)")
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("-p", "--n-prompt", type=int, default=512)
    parser.add_argument("-n", "--n-gen", type=int, default=128)
    parser.add_argument("-r", "--repetitions", type=int, default=3)
    parser.add_argument("-t", "--threads", type=int, default=2)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="roofline-bench-portable-") as tmp:
        builds = {"native": {}, "portable": {"LLAMA_CPP_LIB_PATH": str(portable_lib(Path(tmp)))}}
        for name, env in builds.items():
            print(f"{name:<9} CPU backend: {variant(env)}", flush=True)
        ratios: dict[str, list[float]] = {"pp": [], "tg": []}
        for r in range(args.rounds):
            order = list(builds) if r % 2 == 0 else list(reversed(builds))  # alternate who goes first
            got = {name: bench(builds[name], args) for name in order}
            for test in ("pp", "tg"):
                ratios[test].append(got["portable"][test] / got["native"][test])
            print(f"round {r + 1}: pp{args.n_prompt} native {got['native']['pp']:7.1f} portable "
                  f"{got['portable']['pp']:7.1f} t/s | tg{args.n_gen} native {got['native']['tg']:6.1f} portable "
                  f"{got['portable']['tg']:6.1f} t/s", flush=True)
    for test, size in (("pp", args.n_prompt), ("tg", args.n_gen)):
        vals = ratios[test]
        print(f"{test}{size}: portable/native median {statistics.median(vals):.3f} "
              f"(rounds: {', '.join(f'{v:.3f}' for v in vals)})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
