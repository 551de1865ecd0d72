"""Benchmark: does the engine process cost speed? Compares, interleaved in one run on the same model and
thread count, (a) the engine path the chat uses (Generate over the protocol, sampling included) with
(b) a raw llama_cpp loop in this process (llama_decode + greedy sampling, nothing else).

pp512: a 512-token prompt; engine rate = prompt tokens / wall-clock TTFT measured in the engine.
tg128: 128 generated tokens; engine rate = tokens / time between first and last token as received by
this process (so IPC is included), raw rate = the same count over the raw loop's wall time.
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import llama_cpp  # noqa: E402  (benchmarks may use llama_cpp directly; the app may not)

from app.core.default_model import default_model_path  # noqa: E402
from app.core.metrics import PhaseMetrics  # noqa: E402
from app.engine import protocol as P  # noqa: E402
from app.engine.client import EngineClient  # noqa: E402


def raw_setup(model: str, threads: int, n_ctx: int) -> llama_cpp.Llama:
    return llama_cpp.Llama(model_path=model, n_ctx=n_ctx, n_threads=threads, n_threads_batch=threads,
                           n_batch=512, n_ubatch=512, swa_full=True, verbose=False)


def raw_pp(llm: llama_cpp.Llama, tokens: list[int]) -> float:
    ctx = llm._ctx.ctx
    llama_cpp.llama_memory_clear(llama_cpp.llama_get_memory(ctx), True)
    t0 = time.perf_counter()
    llm._batch.set_batch(batch=tokens, n_past=0, logits_all=False)
    assert llama_cpp.llama_decode(ctx, llm._batch.batch) == 0
    sampler = llama_cpp.llama_sampler_init_greedy()
    llama_cpp.llama_sampler_sample(sampler, ctx, -1)
    dt = time.perf_counter() - t0
    llama_cpp.llama_sampler_free(sampler)
    return len(tokens) / dt


def raw_tg(llm: llama_cpp.Llama, prompt: list[int], n_gen: int) -> float:
    ctx = llm._ctx.ctx
    llama_cpp.llama_memory_clear(llama_cpp.llama_get_memory(ctx), True)
    llm._batch.set_batch(batch=prompt, n_past=0, logits_all=False)
    assert llama_cpp.llama_decode(ctx, llm._batch.batch) == 0
    sampler = llama_cpp.llama_sampler_init_greedy()
    tok = llama_cpp.llama_sampler_sample(sampler, ctx, -1)
    pos = len(prompt)
    t0 = time.perf_counter()
    for _ in range(n_gen - 1):  # like the engine: the first token comes from the prompt's logits
        llm._batch.set_batch(batch=[tok], n_past=pos, logits_all=False)
        assert llama_cpp.llama_decode(ctx, llm._batch.batch) == 0
        tok = llama_cpp.llama_sampler_sample(sampler, ctx, -1)
        pos += 1
    dt = time.perf_counter() - t0
    llama_cpp.llama_sampler_free(sampler)
    return (n_gen - 1) / dt


def engine_run(client: EngineClient, prompt: str, n_gen: int) -> tuple[PhaseMetrics, float]:
    req = P.Generate(request_id=client.new_request_id("bench"), prompt=prompt,
                     sampling=P.Sampling(temperature=0.0, repeat_penalty=1.0, max_tokens=n_gen, ignore_eos=True))
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


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("-m", "--model", default=None)
    ap.add_argument("-t", "--threads", type=int, default=2)
    ap.add_argument("-r", "--repetitions", type=int, default=5)
    ap.add_argument("-p", "--n-prompt", type=int, default=512)
    ap.add_argument("-n", "--n-gen", type=int, default=128)
    args = ap.parse_args()
    model = args.model or str(default_model_path())
    n_ctx = 2048
    raw = raw_setup(model, args.threads, n_ctx)
    rng = random.Random(7)
    vocab = raw.n_vocab()
    words = "the river runs past old stone houses while children play and merchants call".split()
    pp_e, pp_r, tg_e, tg_ec, tg_r = [], [], [], [], []
    with EngineClient() as client:
        client.load(P.LoadConfig(model_path=model, n_ctx=n_ctx, n_threads=args.threads,
                                 n_threads_batch=args.threads, n_batch=512, n_ubatch=512))
        # Warm-up both sides once.
        engine_run(client, "warm up " * 20, 4)
        raw_pp(raw, [rng.randrange(vocab) for _ in range(64)])
        for rep in range(args.repetitions):
            # A distinct prompt each time, so the engine cannot reuse a cached prefix.
            text = f"{rep} {rep * 7919} " + " ".join(rng.choice(words) for _ in range(args.n_prompt * 2))
            toks = raw.tokenize(text.encode(), add_bos=True)[: args.n_prompt]
            text = raw.detokenize(toks[1:]).decode(errors="ignore")
            m, _ = engine_run(client, text, 1)
            pp_e.append(m.prefill_tokens / (m.ttft_ms / 1000))
            pp_r.append(raw_pp(raw, toks))
            m, client_tps = engine_run(client, f"Story {rep}: once upon a time", args.n_gen)
            tg_e.append(m.decode_wall_tps)
            tg_ec.append(client_tps)
            tg_r.append(raw_tg(raw, raw.tokenize(f"Story {rep}: once upon a time".encode()), args.n_gen))
            print(f"rep {rep + 1}/{args.repetitions}: pp engine {pp_e[-1]:.1f} raw {pp_r[-1]:.1f} | "
                  f"tg engine {tg_ec[-1]:.1f} raw {tg_r[-1]:.1f} tok/s", file=sys.stderr)

    def show(name: str, e: list[float], r: list[float]) -> None:
        me, mr = statistics.median(e), statistics.median(r)
        print(f"{name:<28} engine {me:8.1f} tok/s   raw {mr:8.1f} tok/s   ratio {me / mr:.3f}")

    print(f"model {Path(model).name}, {args.threads} threads, {args.repetitions} interleaved repetitions (medians)")
    show(f"pp{args.n_prompt} (TTFT, wall)", pp_e, pp_r)
    show(f"tg{args.n_gen} (as received, IPC incl.)", tg_ec, tg_r)
    show(f"tg{args.n_gen} (in engine)", tg_e, tg_r)
    return 0


if __name__ == "__main__":
    sys.exit(main())
