"""`roofline models`: list the local model library (or import / remove a model)."""

from __future__ import annotations

import argparse

from app.core.files.untrusted import clean_line


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("models", help="list local models (library, default, Hugging Face cache); import/remove")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.add_argument("--import", dest="import_path", metavar="FILE", help="add a GGUF file to the library (copy)")
    p.add_argument("--link", action="store_true", help="with --import: link to the file instead of copying")
    p.add_argument("--remove", metavar="PATH", help="delete a model from disk (asks unless --yes)")
    p.add_argument("--yes", action="store_true", help="with --remove: do not ask")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from app.commands._common import fail, print_json
    from app.core.models import library

    try:
        if args.import_path:
            from pathlib import Path

            if Path(args.import_path).is_dir():
                return fail(f"{args.import_path} is a directory; give the path of a .gguf file inside it")
            m = library.import_model(args.import_path, link=args.link)
            print(m.path)
            return 0
        if args.remove:
            return _remove(args.remove, args.yes)
    except library.LibraryError as exc:
        return fail(str(exc))
    models = library.list_models()
    if args.json:
        print_json([m.to_dict() for m in models])
        return 0
    _print_table(models)
    return 0


def _remove(path: str, yes: bool) -> int:
    import sys

    from app.commands._common import fail
    from app.core.metrics.phase import fmt_bytes
    from app.core.models import library

    model = library.find(path)
    if model is None:
        return fail(f"not in the library: {path}")
    if not yes:
        if not sys.stdin.isatty():
            return fail("refusing to delete without confirmation: pass --yes")
        answer = input(f"Delete {model.path} ({fmt_bytes(model.size)})? [y/N] ")
        if answer.strip().lower() not in ("y", "yes"):
            print("kept")
            return 1
    for p in library.remove(model.path, confirm=True):
        print(f"deleted {p}")
    return 0


def _params(n: int) -> str:
    if n >= 1e9:
        return f"{n / 1e9:.1f}B"
    return f"{n / 1e6:.0f}M" if n else "?"


def _print_table(models: list) -> None:  # type: ignore[type-arg]
    from app.core.metrics.phase import fmt_bytes

    if not models:
        print("no models (try `roofline search` and `roofline pull`)")
        return
    rows = [("NAME", "ARCH", "PARAMS", "QUANT", "SIZE", "CTX", "CHAT", "SOURCE", "LAST USED", "PATH")]
    for m in models:
        if m.broken:
            rows.append((m.path.name, "BROKEN", "", "", fmt_bytes(m.size), "", "", m.source, "", m.broken))
            continue
        rows.append((m.name[:40], m.architecture, _params(m.n_params), m.quant, fmt_bytes(m.size),
                     str(m.n_ctx_train), "yes" if m.has_chat_template else "no", m.source,
                     m.last_used.strftime("%Y-%m-%d %H:%M") if m.last_used else "-", str(m.path)))
    shown = [[clean_line(c) for c in r] for r in rows]  # names and errors come from the files
    widths = [max(len(r[i]) for r in shown) for i in range(len(shown[0]) - 1)]
    for r in shown:
        print("  ".join(c.ljust(w) for c, w in zip(r, widths, strict=False)) + "  " + r[-1])
