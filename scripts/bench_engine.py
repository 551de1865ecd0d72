"""Benchmark: does the engine process cost speed? Three columns, interleaved round by round on the same
model, threads, batch sizes and flash-attention setting:

  engine       the path the chat uses: Generate over the protocol to the engine process, its own sampler
  raw          a llama_cpp loop in this process (llama_decode + the same kind of sampling, nothing else)
  llama-bench  llama.cpp's own benchmark, built from the llama.cpp that llama-cpp-python vendors with the
               same compiler flags (scripts/_llama_tools.sh); it decodes without sampling

Like with like: tg is measured twice, reported separately: greedy (engine: penalties off, argmax; raw:
argmax over the same logits row) and the default sampling chain (engine: the app's sampler with the default
settings; raw: llama.cpp's chain as llama-cpp-python builds it: penalties, top-k, typical, top-p, min-p,
temperature, draw). pp512: engine rate = prompt tokens / wall-clock TTFT in the engine.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import llama_cpp  # benchmarks may use llama_cpp directly; the app may not
import numpy as np

from app.core.metrics.phase import PhaseMetrics
from app.core.models.default_model import default_model_path
from app.engine import protocol as P
from app.engine.client import EngineClient

ROOT = Path(__file__).resolve().parents[1]
DEFAULT = P.Sampling()  # the app's default chain: the settings both sides use for the "default chain" rows
SEED = 1234


# ---------------------------------------------------------------------------------------------- raw side


def raw_setup(model: str, threads: int, n_ctx: int, mmap: bool = True) -> llama_cpp.Llama:
    return llama_cpp.Llama(model_path=model, n_ctx=n_ctx, n_threads=threads, n_threads_batch=threads,
                           n_batch=512, n_ubatch=512, swa_full=True, flash_attn=False, verbose=False,
                           use_mmap=mmap)


def default_chain(n_vocab: int) -> llama_cpp.llama_sampler_p:
    """llama.cpp's sampler chain with the app's default settings, in llama-cpp-python's order."""
    L = llama_cpp  # noqa: N806 - a short alias for the many calls below
    chain = L.llama_sampler_chain_init(L.llama_sampler_chain_default_params())
    for sampler in (
        L.llama_sampler_init_penalties(n_vocab, 64, DEFAULT.repeat_penalty, 0.0, 0.0),
        L.llama_sampler_init_top_k(DEFAULT.top_k),
        L.llama_sampler_init_typical(1.0, 1),
        L.llama_sampler_init_top_p(DEFAULT.top_p, 1),
        L.llama_sampler_init_min_p(DEFAULT.min_p, 1),
        L.llama_sampler_init_temp(DEFAULT.temperature),
        L.llama_sampler_init_dist(SEED),
    ):
        L.llama_sampler_chain_add(chain, sampler)
    return chain


class RawSampler:
    """`greedy`: argmax over llama.cpp's logits row (what the engine does at temperature 0);
    `default`: llama.cpp's own chain."""

    def __init__(self, llm: llama_cpp.Llama, kind: str):
        self.ctx = llm._ctx.ctx
        self.n_vocab = llm.n_vocab()
        self.chain = default_chain(self.n_vocab) if kind == "default" else None

    def sample(self) -> int:
        if self.chain is not None:
            return int(llama_cpp.llama_sampler_sample(self.chain, self.ctx, -1))
        row = np.ctypeslib.as_array(llama_cpp.llama_get_logits_ith(self.ctx, -1), shape=(self.n_vocab,))
        return int(np.argmax(row))

    def close(self) -> None:
        if self.chain is not None:
            llama_cpp.llama_sampler_free(self.chain)


def raw_pp(llm: llama_cpp.Llama, tokens: list[int]) -> float:
    ctx = llm._ctx.ctx
    llama_cpp.llama_memory_clear(llama_cpp.llama_get_memory(ctx), True)
    sampler = RawSampler(llm, "greedy")
    t0 = time.perf_counter()
    llm._batch.set_batch(batch=tokens, n_past=0, logits_all=False)
    assert llama_cpp.llama_decode(ctx, llm._batch.batch) == 0
    sampler.sample()
    return len(tokens) / (time.perf_counter() - t0)


def raw_tg(llm: llama_cpp.Llama, prompt: list[int], n_gen: int, kind: str) -> float:
    ctx = llm._ctx.ctx
    llama_cpp.llama_memory_clear(llama_cpp.llama_get_memory(ctx), True)
    sampler = RawSampler(llm, kind)
    llm._batch.set_batch(batch=prompt, n_past=0, logits_all=False)
    assert llama_cpp.llama_decode(ctx, llm._batch.batch) == 0
    tok = sampler.sample()
    pos = len(prompt)
    t0 = time.perf_counter()
    for _ in range(n_gen - 1):  # like the engine: the first token comes from the prompt's logits
        llm._batch.set_batch(batch=[tok], n_past=pos, logits_all=False)
        assert llama_cpp.llama_decode(ctx, llm._batch.batch) == 0
        tok = sampler.sample()
        pos += 1
    dt = time.perf_counter() - t0
    sampler.close()
    return (n_gen - 1) / dt


# ------------------------------------------------------------------------------------------- engine side


def engine_run(client: EngineClient, prompt: str, n_gen: int, kind: str) -> tuple[PhaseMetrics, float]:
    if kind == "greedy":
        sampling = P.Sampling(temperature=0.0, repeat_penalty=1.0, max_tokens=n_gen, ignore_eos=True)
    else:
        sampling = P.Sampling(max_tokens=n_gen, ignore_eos=True, seed=SEED)  # the defaults otherwise
    req = P.Generate(request_id=client.new_request_id("bench"), prompt=prompt, sampling=sampling)
    arrivals: list[float] = []
    done = None
    for event in client.generate(req):
        if isinstance(event, P.Token):
            arrivals.append(time.perf_counter())
        else:
            done = event
    assert done is not None
    m = PhaseMetrics.from_dict(done.metrics)
    client_tps = (len(arrivals) - 1) / (arrivals[-1] - arrivals[0]) if len(arrivals) > 1 else 0.0
    return m, client_tps


# -------------------------------------------------------------------------------------------- llama-bench


def find_llama_bench(explicit: str | None) -> tuple[str | None, str]:
    """(path of llama-bench, why not) — built once and cached by scripts/_llama_tools.sh."""
    if explicit:
        return (explicit, "") if os.access(explicit, os.X_OK) else (None, f"{explicit} is not executable")
    out = subprocess.run(["bash", str(ROOT / "scripts" / "_llama_tools.sh")], capture_output=True, text=True)
    if out.returncode != 0:
        return None, "scripts/_llama_tools.sh failed: " + " | ".join(out.stderr.strip().splitlines()[-2:])
    return str(Path(out.stdout.strip().splitlines()[-1]) / "llama-bench"), ""


def llama_bench_run(exe: str, model: str, threads: int, n_prompt: int, n_gen: int,
                    load_mode: str = "mmap") -> tuple[float, float]:
    """(pp t/s, tg t/s) from one llama-bench invocation (one repetition each, after its own warm-up)."""
    cmd = [exe, "-m", model, "-p", str(n_prompt), "-n", str(n_gen), "-t", str(threads), "-r", "1",
           "-b", "512", "-ub", "512", "-fa", "off", "-lm", load_mode, "-o", "json"]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=1800)
    if out.returncode != 0:
        raise RuntimeError(f"llama-bench failed: {out.stderr.strip()[-500:]}")
    rows = json.loads(out.stdout)
    pp = next(r["avg_ts"] for r in rows if r["n_prompt"] and not r["n_gen"])
    tg = next(r["avg_ts"] for r in rows if r["n_gen"] and not r["n_prompt"])
    return float(pp), float(tg)


# ---------------------------------------------------------------------------------------------------- main


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("-m", "--model", default=None)
    ap.add_argument("-t", "--threads", type=int, default=2)
    ap.add_argument("-r", "--repetitions", type=int, default=5, help="interleaved rounds")
    ap.add_argument("-p", "--n-prompt", type=int, default=512)
    ap.add_argument("-n", "--n-gen", type=int, default=128)
    ap.add_argument("--llama-bench", default=None, help="llama-bench to use (default: build/cache it)")
    ap.add_argument("--no-llama-bench", action="store_true", help="only the engine and raw columns")
    ap.add_argument("--load-mode", choices=("none", "mmap"), default="none",
                    help="how all three load the weights: read into memory (the engine's default; llama.cpp's "
                         "--no-mmap, llama-bench's -lm none) or mapped from the file (llama-bench's default)")
    args = ap.parse_args()
    model = args.model or str(default_model_path())
    n_ctx = 2048
    exe, why = (None, "--no-llama-bench") if args.no_llama_bench else find_llama_bench(args.llama_bench)
    if exe is None:
        print(f"llama-bench column left out: {why}", file=sys.stderr)
    mmap = args.load_mode == "mmap"
    raw = raw_setup(model, args.threads, n_ctx, mmap)
    rng = random.Random(7)
    vocab = raw.n_vocab()
    words = "the river runs past old stone houses while children play and merchants call".split()
    cols: dict[str, list[float]] = {k: [] for k in (
        "pp_e", "pp_r", "pp_b", "tgg_e", "tgg_ec", "tgg_r", "tgd_e", "tgd_ec", "tgd_r", "tg_b")}
    load = os.getloadavg()
    with EngineClient() as client:
        client.load(P.LoadConfig(model_path=model, n_ctx=n_ctx, n_threads=args.threads,
                                 n_threads_batch=args.threads, n_batch=512, n_ubatch=512, flash_attn=False,
                                 use_mmap=mmap))
        # Warm-up both sides once.
        engine_run(client, "warm up " * 20, 4, "greedy")
        raw_pp(raw, [rng.randrange(vocab) for _ in range(64)])
        for rep in range(args.repetitions):
            # A distinct prompt each time, so the engine cannot reuse a cached prefix.
            text = f"{rep} {rep * 7919} " + " ".join(rng.choice(words) for _ in range(args.n_prompt * 2))
            toks = raw.tokenize(text.encode(), add_bos=True)[: args.n_prompt]
            text = raw.detokenize(toks[1:]).decode(errors="ignore")
            m, _ = engine_run(client, text, 1, "greedy")
            cols["pp_e"].append(m.prefill_tokens / (m.ttft_ms / 1000))
            cols["pp_r"].append(raw_pp(raw, toks))
            story = f"Story {rep}: once upon a time"
            for kind, key in (("greedy", "tgg"), ("default", "tgd")):
                m, client_tps = engine_run(client, story, args.n_gen, kind)
                cols[f"{key}_e"].append(m.decode_wall_tps)
                cols[f"{key}_ec"].append(client_tps)
                cols[f"{key}_r"].append(raw_tg(raw, raw.tokenize(story.encode()), args.n_gen, kind))
            if exe:
                pp_b, tg_b = llama_bench_run(exe, model, args.threads, args.n_prompt, args.n_gen, args.load_mode)
                cols["pp_b"].append(pp_b)
                cols["tg_b"].append(tg_b)
            bench = f" | llama-bench pp {cols['pp_b'][-1]:.1f} tg {cols['tg_b'][-1]:.1f}" if exe else ""
            print(f"round {rep + 1}/{args.repetitions}: pp engine {cols['pp_e'][-1]:.1f} raw {cols['pp_r'][-1]:.1f}"
                  f" | tg greedy engine {cols['tgg_e'][-1]:.1f} raw {cols['tgg_r'][-1]:.1f}"
                  f" | tg default engine {cols['tgd_e'][-1]:.1f} raw {cols['tgd_r'][-1]:.1f}{bench} tok/s",
                  file=sys.stderr)
    load_end = os.getloadavg()

    def med(key: str) -> float | None:
        return statistics.median(cols[key]) if cols[key] else None

    def show(name: str, e: str, r: str, b: str | None) -> None:
        me, mr, mb = med(e), med(r), med(b) if b else None
        assert me is not None and mr is not None
        line = f"{name:<34} engine {me:8.1f}   raw {mr:8.1f}   engine/raw {me / mr:6.3f}"
        if mb:
            line += f"   llama-bench {mb:8.1f}   engine/llama-bench {me / mb:6.3f}"
        print(line)

    print(f"model {Path(model).name}, {args.threads} threads, weights {'mapped (mmap)' if mmap else 'read (no mmap)'}, "
          f"{args.repetitions} interleaved rounds, medians in "
          f"tok/s; load average {load[0]:.1f} at the start, {load_end[0]:.1f} at the end "
          f"({os.cpu_count()} CPUs)")
    show(f"pp{args.n_prompt} (TTFT, wall)", "pp_e", "pp_r", "pp_b" if exe else None)
    show(f"tg{args.n_gen} greedy (in engine)", "tgg_e", "tgg_r", "tg_b" if exe else None)
    show(f"tg{args.n_gen} greedy (as received)", "tgg_ec", "tgg_r", "tg_b" if exe else None)
    show(f"tg{args.n_gen} default chain (in engine)", "tgd_e", "tgd_r", "tg_b" if exe else None)
    show(f"tg{args.n_gen} default chain (as received)", "tgd_ec", "tgd_r", "tg_b" if exe else None)
    if exe:
        print("llama-bench decodes without sampling: its tg column is the ceiling for both sampling rows")
    return 0


if __name__ == "__main__":
    sys.exit(main())
