"""The boundaries hold (import-linter contracts in pyproject.toml) and the code type-checks (mypy)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent


def test_import_contracts_are_kept() -> None:
    """app/core imports no Qt and no llama_cpp; only app/engine touches llama_cpp; the engine knows no UI."""
    res = subprocess.run([str(BIN / "lint-imports"), "--config", "pyproject.toml"], cwd=ROOT,
                         capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stdout + res.stderr
    assert "0 broken" in res.stdout


def test_mypy_is_clean() -> None:
    res = subprocess.run([sys.executable, "-m", "mypy"], cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert res.returncode == 0, res.stdout + res.stderr


def test_llama_cpp_is_imported_only_by_the_worker() -> None:
    """A stricter reading than the contracts: inside app/, only app/engine/worker.py (and modules named in
    ENGINE_ONLY, imported by the worker alone) contain `import llama_cpp`."""
    engine_only = {"app/engine/worker.py", "app/engine/quantize.py", "app/engine/speculative.py",
                   "app/engine/decoding.py", "app/engine/backends.py", "app/engine/context_overflow.py",
                   "app/engine/draft_model.py",
                   # the batch engine of `roofline serve`: its own child process, built on the worker
                   "app/engine/batch/engine.py"}
    offenders = []
    for path in (ROOT / "app").rglob("*.py"):
        rel = path.relative_to(ROOT).as_posix()
        text = path.read_text(encoding="utf-8")
        if ("import llama_cpp" in text or "from llama_cpp" in text) and rel not in engine_only:
            offenders.append(rel)
    assert offenders == []
