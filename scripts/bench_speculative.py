"""Benchmark: prompt-lookup speculative decoding on vs off, interleaved, greedy, same engine.

Two prompts: a repetitive one (rewrite a function: the answer copies most of the prompt) and a free-form
one (a story: little to copy). For each, decode speed = (generated - 1) tokens / wall time from the first
to the last token, median over the rounds; acceptance = accepted / drafted tokens. It says plainly when
lookup makes decoding slower, and whether the greedy text was identical.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from app.core.default_model import default_model_path  # noqa: E402
from app.core.metrics import PhaseMetrics  # noqa: E402
from app.engine import protocol as P  # noqa: E402
from app.engine.client import EngineClient  # noqa: E402

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
    args = ap.parse_args()
    model = args.model or str(default_model_path())
    cfg = P.LoadConfig(model_path=model, n_ctx=2048, n_threads=args.threads, n_threads_batch=args.threads)
    with EngineClient() as engine:
        engine.load(cfg)
        for name, prompt in PROMPTS.items():
            rates: dict[bool, list[float]] = {False: [], True: []}
            texts: dict[bool, set[str]] = {False: set(), True: set()}
            drafted = accepted = 0
            for _ in range(args.rounds):
                for lookup in (False, True):
                    engine.load(cfg)  # same empty cache for both: identical prefill numerics
                    req = P.Generate(request_id=engine.new_request_id("spec"), prompt=prompt, prompt_lookup=lookup,
                                     sampling=P.Sampling(temperature=0.0, max_tokens=args.tokens, seed=1,
                                                         ignore_eos=True))
                    done = list(engine.generate(req))[-1]
                    m = PhaseMetrics.from_dict(done.metrics)
                    rates[lookup].append(m.decode_wall_tps)
                    texts[lookup].add(done.text)
                    if lookup:
                        drafted += m.draft_tokens
                        accepted += m.draft_accepted
            off, on = statistics.median(rates[False]), statistics.median(rates[True])
            speedup = on / off if off else float("nan")
            same = texts[False] == texts[True] and len(texts[False]) == 1
            verdict = "faster" if speedup >= 1.02 else "SLOWER" if speedup <= 0.98 else "no change"
            print(f"{name}:")
            print(f"  decode off {off:6.1f} tok/s   on {on:6.1f} tok/s   speed-up x{speedup:.2f} ({verdict})")
            print(f"  drafts accepted {accepted}/{drafted} ({100 * accepted / drafted if drafted else 0:.0f} %)"
                  f"   greedy text identical on/off: {'yes' if same else 'NO'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
