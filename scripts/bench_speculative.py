"""Benchmark: speculative decoding on vs off, interleaved, greedy, same engine: prompt lookup, or with
`--draft-model PATH` a draft model, whose measured speed-up is printed beside the one the speed model
predicts (app.core.predict.speculative_speedup) at the acceptance measured in the same runs.

Two prompts: a repetitive one (rewrite a function: the answer copies most of the prompt) and a free-form
one (a story: little to copy). For each, decode speed = (generated - 1) tokens / wall time from the first
to the last token, median over the rounds; acceptance = accepted / drafted tokens. It says plainly when
drafting makes decoding slower, and whether the greedy text was identical.
"""

from __future__ import annotations

import argparse
import dataclasses
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from app.commands._draft_summary import measured_acceptance, this_machines_rates
from app.core.gguf.info import inspect_gguf
from app.core.metrics.phase import PhaseMetrics
from app.core.models.default_model import default_model_path
from app.core.predict.memory import MemoryConfig
from app.core.predict.speculative_speedup import predict_speedup
from app.engine import protocol as P
from app.engine.client import EngineClient

CODE = '''def total_price(items, tax_rate, discount=None):
    subtotal = 0
    for item in items:
        if item.quantity <= 0:
            continue
        subtotal += item.price * item.quantity
    if discount is not None:
        subtotal = subtotal - subtotal * discount
    tax = subtotal * tax_rate
    return round(subtotal + tax, 2)
'''
PROMPTS = {
    "repetitive (code edit)": f"Rewrite this function with renamed variables:\n\n{CODE}\nRewritten:\n\n",
    "free-form (story)": "Write a short story about a lighthouse keeper who finds a message in a bottle.\n\n",
}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("-m", "--model", default=None)
    ap.add_argument("-n", "--tokens", type=int, default=128)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("-t", "--threads", type=int, default=None)
    ap.add_argument("--draft-model", default=None,
                    help="a draft model with the same vocabulary (default: prompt lookup)")
    ap.add_argument("--draft-max", type=int, default=8)
    ap.add_argument("--prompts", nargs="+", choices=list(PROMPTS), default=list(PROMPTS), metavar="PROMPT",
                    help=f"which prompts ({', '.join(repr(p) for p in PROMPTS)})")
    args = ap.parse_args()
    model = args.model or str(default_model_path())
    cfg = P.LoadConfig(model_path=model, n_ctx=2048, n_threads=args.threads, n_threads_batch=args.threads)
    cfg_on = dataclasses.replace(cfg, draft_model=args.draft_model, draft_max=args.draft_max)
    drafter = f"draft model {Path(args.draft_model).name}" if args.draft_model else "prompt lookup"
    machine_rates = this_machines_rates() if args.draft_model else None
    print(f"speculative decoding with {drafter}, {args.tokens} tokens, median of {args.rounds} interleaved rounds")
    with EngineClient() as engine:
        for name in args.prompts:
            prompt = PROMPTS[name]
            rates: dict[bool, list[float]] = {False: [], True: []}
            texts: dict[bool, set[str]] = {False: set(), True: set()}
            counts = {"draft_tokens": 0, "draft_accepted": 0, "lookup_batch_steps": 0}
            prompt_tokens = 0
            for _ in range(args.rounds):
                for on in (False, True):
                    engine.load(cfg_on if on else cfg)  # an empty cache for both: identical prefill numerics
                    req = P.Generate(request_id=engine.new_request_id("spec"), prompt=prompt,
                                     prompt_lookup=on and not args.draft_model,
                                     sampling=P.Sampling(temperature=0.0, max_tokens=args.tokens, seed=1,
                                                         ignore_eos=True))
                    done = list(engine.generate(req))[-1]
                    m = PhaseMetrics.from_dict(done.metrics)
                    rates[on].append(m.decode_wall_tps)
                    texts[on].add(done.text)
                    prompt_tokens = m.prompt_tokens
                    if on:
                        for key in counts:
                            counts[key] += int(done.metrics.get(key) or 0)
            off_tps, on_tps = statistics.median(rates[False]), statistics.median(rates[True])
            speedup = on_tps / off_tps if off_tps else float("nan")
            same = texts[False] == texts[True] and len(texts[False]) == 1
            verdict = "faster" if speedup >= 1.02 else "SLOWER" if speedup <= 0.98 else "no change"
            drafted, accepted = counts["draft_tokens"], counts["draft_accepted"]
            print(f"{name}:")
            print(f"  decode off {off_tps:6.1f} tok/s   on {on_tps:6.1f} tok/s   speed-up measured x{speedup:.2f} "
                  f"({verdict})")
            print(f"  drafts accepted {accepted}/{drafted} ({100 * accepted / drafted if drafted else 0:.0f} %)"
                  f"   greedy text identical on/off: {'yes' if same else 'NO'}")
            seen = measured_acceptance(counts)
            if args.draft_model and seen is not None:
                alpha, k = seen
                p = predict_speedup(inspect_gguf(model), inspect_gguf(args.draft_model), machine_rates, alpha, k,
                                    MemoryConfig(n_ctx=2048), depth=prompt_tokens + args.tokens // 2)
                label = "calibrated" if machine_rates.cpu.calibrated else "uncalibrated"
                print(f"  speed-up predicted x{p.speedup:.2f} vs measured x{speedup:.2f}  (per-token acceptance "
                      f"{100 * alpha:.0f} %, {k:.1f} drafted a step; {label} rates)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
