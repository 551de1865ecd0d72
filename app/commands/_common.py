"""Helpers shared by CLI commands."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from app.core.gguf.facts import GGUFInfo


def add_model_arg(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("-m", "--model", help="GGUF file (default: the embedded Gemma 3 270M Q4_K_M)")


def resolve_model(arg: str | None) -> Path:
    from app.core.models.default_model import default_model_path

    if not arg:
        return default_model_path()
    path = Path(arg).expanduser()
    if path.is_dir():
        raise SystemExit(f"roofline: {path} is a directory; give the path of a .gguf file inside it")
    if not path.exists():
        raise SystemExit(f"roofline: model file not found: {path}")
    return path


def inspect_or_fail(path: Path) -> GGUFInfo | None:
    """The model's GGUF facts, or None after one line saying why the file cannot be read (exit status 1)."""
    from app.core.gguf.info import GGUFError, inspect_gguf

    try:
        return inspect_gguf(path)
    except GGUFError as exc:
        fail(f"{path}: {exc}")
        return None


def print_json(data: Any) -> None:
    json.dump(data, sys.stdout, indent=2, default=str)
    sys.stdout.write("\n")


def fail(message: str, code: int = 1) -> int:
    from app.core.files.untrusted import clean_text

    print(f"roofline: {clean_text(message)}", file=sys.stderr)  # messages quote hub, file and server text
    return code


def api_key_arg(value: str | None) -> str | None:
    """--api-key: '-' asks for it without echo; absent: ROOFLINE_API_KEY (then the OS keyring). Both keep the
    key out of the process list, where `--api-key KEY` shows it to every local user."""
    import os

    if value == "-":
        import getpass

        return getpass.getpass("API key: ").strip() or None
    return value or os.environ.get("ROOFLINE_API_KEY") or None
