"""The boundaries hold (import-linter contracts in pyproject.toml) and the code type-checks (mypy)."""

from __future__ import annotations

import ast
import importlib.metadata
import re
import subprocess
import sys
import tomllib
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


# Where llama_cpp may be imported, relative to app/engine/ ("worker/" is the whole package): the engine's
# child processes and helpers only they import. README's Architecture section names each one.
LLAMA_CPP_IMPORTERS = {"worker/", "batch/engine.py", "quantize.py", "backends.py", "decoding.py",
                       "context_overflow.py", "draft_model.py"}


def _imports_llama_cpp(path: Path) -> bool:
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import) and any(a.name.split(".")[0] == "llama_cpp" for a in node.names):
            return True
        if isinstance(node, ast.ImportFrom) and node.level == 0 \
                and (node.module or "").split(".")[0] == "llama_cpp":
            return True
    return False


def test_llama_cpp_is_imported_only_by_the_engine_processes() -> None:
    """A stricter reading than the contracts: inside app/, only the modules in LLAMA_CPP_IMPORTERS import
    llama_cpp, each entry is still one (the list is exact), and README's Architecture section names each."""
    importers = sorted(p.relative_to(ROOT).as_posix() for p in (ROOT / "app").rglob("*.py")
                       if _imports_llama_cpp(p))
    allowed, used = [], set()
    for rel in importers:
        inside = rel.removeprefix("app/engine/") if rel.startswith("app/engine/") else None
        entry = next((e for e in LLAMA_CPP_IMPORTERS if inside is not None
                      and (inside == e or (e.endswith("/") and inside.startswith(e)))), None)
        if entry is None:
            allowed.append(rel)
        else:
            used.add(entry)
    assert allowed == [], f"llama_cpp imported outside the engine processes: {allowed}"
    assert used == LLAMA_CPP_IMPORTERS, f"listed but importing no llama_cpp: {LLAMA_CPP_IMPORTERS - used}"
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    architecture = readme[readme.index("## Architecture"):]
    architecture = architecture[:architecture.index("The boundaries are enforced")]  # the package map
    assert [e for e in sorted(LLAMA_CPP_IMPORTERS) if e not in architecture] == []


def _normalized(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()  # PEP 503: "PySide6_Essentials" is "pyside6-essentials"


def _top_level_imports(path: Path) -> set[str]:
    names = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module.split(".")[0])
    return names


def test_every_third_party_module_the_app_imports_is_a_declared_dependency() -> None:
    """Each top-level module imported anywhere in app/ (at any depth, lazily or not) is the standard library,
    the app itself, or comes from a distribution in pyproject's [project].dependencies: a module that only
    arrives as another package's dependency (httpx2 under huggingface_hub, pydantic under
    pydantic-settings) breaks the day that package changes its own."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    declared = {_normalized(re.split(r"[\s\[<>=!~;]", req, maxsplit=1)[0]) for req in project["dependencies"]}
    providers = importlib.metadata.packages_distributions()
    undeclared = {}
    for path in sorted((ROOT / "app").rglob("*.py")):
        for module in _top_level_imports(path) - set(sys.stdlib_module_names) - {"app", "__future__"}:
            dists = {_normalized(d) for d in providers.get(module, [])}
            if not dists & declared:
                undeclared.setdefault(module, path.relative_to(ROOT).as_posix())
    assert undeclared == {}, f"imported but not declared in pyproject.toml (module: first importer): {undeclared}"
