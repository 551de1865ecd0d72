"""`roofline default-model`: assemble and verify the embedded default model, print its path."""

from __future__ import annotations

import argparse


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("default-model", help="assemble/verify the embedded default model and print its path")
    p.add_argument("--quiet", action="store_true", help="print nothing on success")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from app.core.models.default_model import default_model_path

    path = default_model_path()
    if not args.quiet:
        print(path)
    return 0
