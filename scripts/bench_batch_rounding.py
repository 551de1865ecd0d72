"""How far a verification batch moves greedy decisions: the measurement behind speculative.TIE_MARGIN.

Speculative decoding checks drafted tokens in one batch, and llama.cpp's batch kernels round differently
from its one-token kernels, so a batch's logits are not the plain path's. A greedy choice can only flip
where the gap between the top candidate and a rival changes by more than the gap itself. For several
prompts this decodes greedily one token at a time (the plain path), then evaluates the same tokens again in
batches of 2-8 on top of batch-written cells (as accepted drafts leave them), and prints, per position, how
much the batch changed the gap between the plain path's top candidate and each of the next nine, and how
far it moved any of those ten logits.

    scripts/bench_batch_rounding [--model PATH] [-t 2] [--tokens 60]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import llama_cpp
import numpy as np

from app.core.models.default_model import default_model_path
from app.core.predict.hardware import probe_cpu
from app.engine.llama.decoding import logits_row
from app.engine.llama.prompt_lookup import TIE_MARGIN

PROMPTS = ("The capital of France is", "Once upon a time, in a small village", "def fibonacci(n):",
           "The three primary colours are", "Copy this list: apple, banana, cherry, apple, banana,",
           "In 1969, the first", "SELECT name FROM users WHERE", "Dear Sir or Madam, I am writing")
WIDTHS = (2, 3, 5, 8)
RIVALS = 9


def one_prompt(llm: llama_cpp.Llama, text: str, n_tokens: int) -> tuple[list[float], list[float], list[float]]:
    """(top-two gap changes, top-vs-rival gap changes, logit moves) at every batched position of one prompt."""
    prompt = llm.tokenize(text.encode(), add_bos=True)
    llm.reset()
    llm.eval(prompt)
    seq, plain = list(prompt), []
    for _ in range(n_tokens):
        token = int(logits_row(llm).argmax())
        seq.append(token)
        llm.eval([token])
        plain.append(logits_row(llm).copy())  # the row after seq[len(prompt) + i]
    top2: list[float] = []
    rivals: list[float] = []
    moves: list[float] = []
    n0 = len(prompt)
    for width in WIDTHS:
        llm.reset()
        llm.eval(prompt)
        pos = n0
        while pos + width <= n0 + n_tokens:
            chunk = seq[pos:pos + width]
            llm._batch.set_batch(batch=chunk, n_past=llm.n_tokens, logits_all=True)
            llm._ctx.decode(llm._batch)
            llm.input_ids[llm.n_tokens:llm.n_tokens + width] = chunk
            llm.n_tokens += width
            for i in range(width):
                batch, single = logits_row(llm, i), plain[pos - n0 + i]
                top = np.argsort(single)[-(RIVALS + 1):][::-1]
                change = np.abs((batch[top[0]] - batch[top[1:]]) - (single[top[0]] - single[top[1:]]))
                top2.append(float(change[0]))
                rivals.append(float(change.max()))
                moves.append(float(np.abs(batch[top] - single[top]).max()))
            pos += width
    return top2, rivals, moves


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", type=Path, default=None, help="GGUF file (default: the default model)")
    ap.add_argument("-t", "--threads", type=int, default=2)
    ap.add_argument("--tokens", type=int, default=60, help="greedy tokens per prompt")
    args = ap.parse_args(argv)
    model = args.model or default_model_path()
    if not model.is_file():
        print(f"error: no model at {model}", file=sys.stderr)
        return 1
    llm = llama_cpp.Llama(str(model), n_ctx=512, n_threads=args.threads, verbose=False)
    found: tuple[list[float], list[float], list[float]] = ([], [], [])
    for text in PROMPTS:
        for acc, part in zip(found, one_prompt(llm, text, args.tokens), strict=True):
            acc.extend(part)
    cpu = probe_cpu()
    print(f"{time.strftime('%Y-%m-%d')} · {model.name} · {cpu.model} ({' '.join(cpu.features)}) · "
          f"{args.threads} threads · {len(PROMPTS)} prompts × {args.tokens} tokens · batches {WIDTHS}")
    for name, values in (("gap change, top vs second", found[0]),
                         (f"gap change, top vs any of the next {RIVALS}", found[1]),
                         ("move of any of the top ten logits", found[2])):
        a = np.asarray(values)
        print(f"{name:42s} max {a.max():.3f}  p99.9 {np.percentile(a, 99.9):.3f}  p99 {np.percentile(a, 99):.3f}"
              f"  median {np.median(a):.3f}  ({a.size} positions)")
    worst = max(found[1])
    print(f"TIE_MARGIN = {TIE_MARGIN}: {TIE_MARGIN / worst:.2f}x the largest gap change measured here"
          + ("" if TIE_MARGIN > worst else "  << NOT ENOUGH: greedy output may differ with drafts"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
