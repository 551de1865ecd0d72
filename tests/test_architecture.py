"""The boundaries hold (import-linter contracts in pyproject.toml) and the code type-checks (mypy)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent


def test_import_contracts_are_kept() -> None:
    """app/core imports no Qt and no llama_cpp; only app/engine touches llama_cpp; the engine knows no UI;
    commands import the UI only in commands/gui.py; the UI reaches the engine only through its client side;
    charts (app/charts) know no UI."""
    res = subprocess.run([str(BIN / "lint-imports"), "--config", "pyproject.toml"], cwd=ROOT,
                         capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stdout + res.stderr
    assert "0 broken" in res.stdout


def test_mypy_is_clean() -> None:
    res = subprocess.run([sys.executable, "-m", "mypy"], cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert res.returncode == 0, res.stdout + res.stderr


# What README.md's Architecture section says: llama_cpp is imported only by the modules that run inside the
# engine's child processes: the worker and the modules it alone imports, the quantizer, the batch engine.
LLAMA_CPP_IMPORTERS = {
    "app/engine/worker.py", "app/engine/decoding.py", "app/engine/backends.py", "app/engine/context_overflow.py",
    "app/engine/draft_model.py", "app/engine/quantize.py", "app/engine/batch/engine.py",
}


def test_llama_cpp_is_imported_only_by_the_engine_processes() -> None:
    """A stricter reading than the contracts: inside app/, exactly the modules README names contain
    `import llama_cpp` (a module that stops needing it leaves the list, so the list stays true)."""
    importers = set()
    for path in (ROOT / "app").rglob("*.py"):
        text = path.read_text(encoding="utf-8")
        if "import llama_cpp" in text or "from llama_cpp" in text:
            importers.add(path.relative_to(ROOT).as_posix())
    assert sorted(importers - LLAMA_CPP_IMPORTERS) == [], "llama_cpp imported outside the engine processes"
    assert sorted(LLAMA_CPP_IMPORTERS - importers) == [], "listed but no longer importing llama_cpp"
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    named = [rel for rel in LLAMA_CPP_IMPORTERS if rel.removeprefix("app/engine/") in readme]
    assert sorted(named) == sorted(LLAMA_CPP_IMPORTERS), "README.md names every llama_cpp importer"
