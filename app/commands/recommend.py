"""`roofline recommend [-m FILE...] [--ctx N] [--kv-type T] [--json]`: which quantization, context and GPU
offload to use on this machine, with predicted speed and quality cost for every file given."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from app.core.predict.recommend import Recommendation


def register(sub: argparse._SubParsersAction) -> None:
    from app.commands import _args as A
    from app.core.gguf.kv_types import DEFAULT_KV_TYPE, KV_TYPES

    p = sub.add_parser("recommend", help="which quant / context / GPU offload fits this machine, and how fast")
    p.add_argument("-m", "--model", nargs="+", metavar="GGUF",
                   help="GGUF files to compare (e.g. several quants of one model; default: the embedded model)")
    p.add_argument("--ctx", type=A.context_size, default=None,
                   help="context you want (default 8192, or the model's if less)")
    p.add_argument("--kv-type", default=DEFAULT_KV_TYPE, choices=KV_TYPES, help="KV cache type")
    p.add_argument("-t", "--threads", type=A.threads, default=None,
                   help="llama.cpp threads to predict for (default: what a load would use: settings, preset, tune)")
    p.add_argument("--remeasure", action="store_true", help="measure memory bandwidth again first")
    p.add_argument("--draft-model", default=None, metavar="GGUF",
                   help="also predict the decode speed-up of speculative decoding with this draft model")
    p.add_argument("--draft-max", type=A.int_range(1, 64), default=8, metavar="N",
                   help="tokens the draft model proposes a step (default 8, as `roofline chat`)")
    p.add_argument("-d", "--depth", type=A.int_list(0), default=None, metavar="D[,D...]",
                   help="also predict decode tok/s with D tokens already in the context (a column each; e.g. 8192 or "
                        "4096,32768): decode slows as the KV cache fills")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from app.commands._common import fail, inspect_or_fail, print_json, resolve_model
    from app.core.predict.recommend import Candidate, Machine, recommend

    paths = [resolve_model(m) for m in args.model] if args.model else [resolve_model(None)]
    cands = []
    for path in paths:
        info = inspect_or_fail(path)
        if info is None:
            return 1
        cands.append(Candidate(info, name=f"{info.file_type} ({path.name})" if len(paths) > 1 else info.file_type,
                               size=path.stat().st_size))
    if args.ctx is not None and args.ctx <= 0:
        return fail("--ctx must be positive")
    from app.core.predict.load_plan import planned_threads

    threads, batch = planned_threads(paths[0], n_threads=args.threads)  # the threads a load of it would use
    from app.engine.device_query import query_devices

    machine = Machine.from_system(remeasure=args.remeasure, threads=threads, batch_threads=batch,
                                  llama_devices=query_devices())
    rec = recommend(cands, machine, n_ctx=args.ctx, kv_type=args.kv_type)
    at_depth = depth_columns(rec, cands, machine, args.depth or [])
    draft: dict[str, Any] | None = None
    if args.draft_model:
        predicted = draft_prediction(rec, paths, resolve_model(args.draft_model), machine, args.draft_max)
        if isinstance(predicted, str):
            return fail(predicted)
        draft = predicted
    if args.json:
        data = rec.to_dict()
        data["threads"] = machine.rates.cpu.threads
        data["machine"] = machine.hw.to_dict()
        data["rates"] = machine.rates.to_dict()
        if draft is not None:
            data["speculative"] = draft
        for v, row in zip(data["variants"], at_depth, strict=True):
            v["decode_tps_at_depth"] = {str(d): tps for d, tps in row.items()}
        print_json(data)
        return 0
    print_report(rec, at_depth)
    print(f"speeds for {machine.rates.cpu.threads} llama.cpp thread(s) on the CPU "
          f"({'-t' if args.threads else 'settings, preset or tune result; llama.cpp default when unset'})")
    if draft is not None:
        print(draft["line"])
        if draft["vocabulary"]:
            print(f"note: {draft['vocabulary']}")
    return 0


def draft_prediction(rec: Recommendation, paths: list[Any], draft_path: Any, machine: Any,
                     draft_max: int) -> dict[str, Any] | str:
    """The predicted speed-up of the recommended variant with `draft_path` drafting (a string: why not)."""
    from app.core.gguf.info import GGUFError, inspect_gguf
    from app.core.gguf.vocabulary import draft_problem
    from app.core.predict.memory import MemoryConfig
    from app.core.predict.speculative_speedup import ACCEPTANCES, break_even_acceptance, predict_speedup, speedup_line
    from app.core.predict.speed import Rates

    pick = rec.pick
    if pick is None:
        return "no variant fits, so there is nothing to draft for"
    target_path = paths[rec.variants.index(pick)]
    try:
        target, draft = inspect_gguf(target_path), inspect_gguf(draft_path)
    except GGUFError as exc:
        return f"{draft_path}: {exc}"
    rates = machine.rates if rec.budget.gpu is not None else Rates(machine.rates.cpu, None)
    cfg = MemoryConfig(n_ctx=pick.n_ctx, type_k=rec.kv_type, type_v=rec.kv_type, n_gpu_layers=pick.n_gpu_layers,
                       n_cpu_moe=pick.n_cpu_moe)
    return {
        "draft_model": str(draft_path), "draft_max": draft_max, "target": pick.name,
        "speedup": {f"{a:g}": predict_speedup(target, draft, rates, a, draft_max, cfg).speedup for a in ACCEPTANCES},
        "break_even_acceptance": break_even_acceptance(target, draft, rates, draft_max, cfg),
        "vocabulary": draft_problem(str(target_path), str(draft_path)),  # None: it can draft for this model
        "line": f"with draft model {draft_path.name}: " + speedup_line(target, draft, rates, draft_max, cfg),
    }


def depth_columns(rec: Recommendation, cands: list[Any], machine: Any, depths: list[int]
                  ) -> list[dict[int, float | None]]:
    """Per variant: depth → predicted decode tok/s with that many tokens in the context (None: it does not
    run here), for the placement and context the recommender found."""
    from app.core.predict.depth import decode_at
    from app.core.predict.memory import MemoryConfig
    from app.core.predict.speed import Rates

    rates = machine.rates if rec.budget.gpu is not None else Rates(machine.rates.cpu, None)
    out: list[dict[int, float | None]] = []
    for cand, v in zip(cands, rec.variants, strict=True):
        runs = v.verdict not in ("does not fit", "not a text model") and v.n_ctx > 0
        cfg = MemoryConfig(n_ctx=v.n_ctx, type_k=rec.kv_type, type_v=rec.kv_type, n_gpu_layers=v.n_gpu_layers,
                           n_cpu_moe=v.n_cpu_moe)
        out.append({d: decode_at(cand.info, rates, cfg, d) if runs else None for d in depths})
    return out


def print_report(rec: Recommendation, at_depth: list[dict[int, float | None]] | None = None) -> None:
    from app.core.files.untrusted import clean_text
    from app.core.gguf.kv_types import KV_TYPES
    from app.core.metrics.phase import fmt_bytes

    print(clean_text(rec.sentence))  # may name the model (from its file)
    print()
    from app.core.predict.depth import fmt_tokens

    depths = list(at_depth[0]) if at_depth else []
    extra = "".join(f" {'@' + fmt_tokens(d):>8}" for d in depths)
    header = f"{'variant':<28} {'size':>9}  {'verdict':<12} {'ngl':>4}  {'max ctx ' + '/'.join(KV_TYPES):<23} " \
             f"{'prefill':>9} {'decode':>8}{extra}  quality"
    print(header)
    print("-" * len(header))
    for i, v in enumerate(rec.variants):
        ctx = "/".join(f"{v.max_ctx[t] // 1024}k" if v.max_ctx[t] >= 1024 else str(v.max_ctx[t])
                       for t in KV_TYPES)
        speed = (f"{v.prefill_tps:>7.0f}/s {v.decode_tps:>6.1f}/s"
                 if v.verdict not in ("does not fit", "not a text model") else f"{'-':>9} {'-':>8}")
        kld = f"KLD {'≈' if v.quality.estimated else ''}{v.quality.kld:.3g}" if v.quality.kld is not None else "?"
        mark = "★ " if v.recommended else "  "
        deep = "".join(f" {tps:>6.1f}/s" if tps is not None else f" {'-':>8}" for tps in
                       (at_depth[i].values() if at_depth else []))
        print(f"{mark}{v.name[:26]:<26} {fmt_bytes(v.size):>9}  {v.verdict:<12} {v.n_gpu_layers:>4}  {ctx:<23} "
              f"{speed}{deep}  {v.quality.grade} ({kld})")
    print()
    pick = rec.pick or (rec.variants[0] if rec.variants else None)
    if pick is not None and pick.memory is not None:
        m = pick.memory
        gpu = f", GPU {fmt_bytes(m.gpu.total)}" if m.gpu.total else ""
        state = m.cpu.state + m.gpu.state  # a hybrid's recurrent layers: fixed per sequence, beside the KV cache
        print(f"memory for {pick.name} at {pick.n_ctx} context: RAM {fmt_bytes(m.cpu.total)}{gpu} "
              f"(KV cache {fmt_bytes(m.kv_bytes)}" + (f", recurrent state {fmt_bytes(state)}" if state else "")
              + f", weights {fmt_bytes(m.cpu.weights + m.gpu.weights)}, "
              f"compute {fmt_bytes(m.cpu.compute + m.gpu.compute)})")
    if pick is not None and pick.curve:
        points = ", ".join(f"{n}:{tps:.0f}" for n, tps in pick.curve[:: max(1, len(pick.curve) // 8)])
        print(f"what-if decode tok/s by n_gpu_layers: {points}")
    if depths:
        print("@D: predicted decode tok/s with D tokens already in the context (at least D of context; the KV "
              "cache read per token grows with it)")
    if pick is not None and pick.n_cpu_moe:
        print(f"run it with: -ngl {pick.n_gpu_layers} --n-cpu-moe {pick.n_cpu_moe} (experts of blocks "
              f"0-{pick.n_cpu_moe - 1} in RAM)")
    for note in rec.budget.notes:
        print(f"note: {note}")
    label = {v.speed_label for v in rec.variants if v.speed_label}
    if "uncalibrated" in label:
        print("note: speeds are uncalibrated estimates from measured bandwidth; `roofline calibrate` measures "
              "this machine")
    print("note: quality figures are from the llama.cpp perplexity scoreboard (Llama-3-8B); damage varies by "
          "model")
