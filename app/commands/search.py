"""`roofline search TEXT`: find GGUF models on the Hugging Face Hub; `roofline search OWNER/REPO` shows
that repo's quantizations with the fit verdict and predicted speed on this machine."""

from __future__ import annotations

import argparse

from app.core.files.untrusted import clean_line


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("search", help="search GGUF models on the hub, or show a repo's quantizations")
    p.add_argument("text", help="words to search for, or OWNER/REPO to list its quantizations")
    p.add_argument("--sort", choices=["downloads", "likes", "updated"], default="downloads")
    p.add_argument("--limit", type=int, default=20)
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from app.commands._common import fail, print_json
    from app.core.hub import listing as hub

    try:
        if "/" in args.text and " " not in args.text.strip():
            return _variants(args)
        results = hub.search(args.text, sort=args.sort, limit=args.limit)
    except hub.HubError as exc:
        return fail(str(exc))
    if args.json:
        print_json([r.__dict__ for r in results])
        return 0
    if not results:
        print(f"no GGUF models match {args.text!r}")
        return 0
    for r in results:
        r.repo_id = clean_line(r.repo_id, 96)  # names come from the hub
    width = max(len(r.repo_id) for r in results)
    print(f"{'REPO'.ljust(width)}  {'DOWNLOADS':>10}  {'LIKES':>6}  UPDATED")
    for r in results:
        updated = r.last_modified.strftime("%Y-%m-%d") if r.last_modified else "-"
        print(f"{r.repo_id.ljust(width)}  {r.downloads:>10}  {r.likes:>6}  {updated}")
    print("\n`roofline search OWNER/REPO` shows its quantizations; `roofline pull OWNER/REPO[:QUANT]` downloads.")
    return 0


def _variants(args: argparse.Namespace) -> int:
    from app.commands._common import print_json
    from app.core.gguf import remote_header as remote_gguf
    from app.core.hub import listing as hub
    from app.core.metrics.phase import fmt_bytes

    repo, _ = hub.parse_repo_spec(args.text)
    rv = hub.list_variants(repo)
    if not rv.variants:
        print(f"{repo} has no GGUF model files")
        return 1
    rows = remote_gguf.assess_repo(rv)
    if args.json:
        print_json([r.__dict__ for r in rows])
        return 0
    print(f"{repo} @ {clean_line(rv.revision[:10])}  (predictions for this machine, from each file's header)")
    print(f"  {'QUANT':<11} {'SIZE':>10}  {'VERDICT':<10} {'MAX CTX':>8} {'PREFILL':>9} {'DECODE':>9}  QUALITY")
    for r in rows:
        mark = "*" if r.recommended else " "
        if r.error:
            print(f"{mark} {r.quant:<11} {fmt_bytes(r.size):>10}  unreadable header: {clean_line(r.error)}")
            continue
        pp = f"{_rate(r.prefill_tps)} t/s" if r.prefill_tps else "-"
        tg = f"{_rate(r.decode_tps)} t/s" if r.decode_tps else "-"
        q = f"KLD {r.quality_kld:g}" if r.quality_kld is not None else "-"
        ctx = f"{r.max_context}" if r.max_context else "-"
        print(f"{mark} {r.quant:<11} {fmt_bytes(r.size):>10}  {r.verdict:<10} {ctx:>8} {pp:>9} {tg:>9}  {q}")
    best = next((r for r in rows if r.recommended), None)
    print(f"* recommended: {clean_line(best.detail.get('sentence', ''))}" if best
          else "none of these fits this machine")
    return 0


def _rate(x: float) -> str:
    return f"{x:,.0f}" if x >= 100 else f"{x:.1f}" if x >= 10 else f"{x:.2f}"
