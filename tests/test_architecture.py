"""The boundaries hold (import-linter contracts in pyproject.toml), the code type-checks (mypy), ruff passes."""

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


def test_ruff_is_clean() -> None:
    """The rule sets pyproject's [tool.ruff.lint] selects, over the app, the tests, the scripts and packaging."""
    res = subprocess.run([str(BIN / "ruff"), "check", "--no-cache", "app", "tests", "scripts", "packaging"], cwd=ROOT,
                         capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stdout + res.stderr


def test_mypy_is_clean() -> None:
    res = subprocess.run([sys.executable, "-m", "mypy"], cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert res.returncode == 0, res.stdout + res.stderr


LLAMA_SIDE = "app/engine/llama/"  # the engine's child processes: the one package that imports llama_cpp


def _imports_llama_cpp(path: Path) -> bool:
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import) and any(a.name.split(".")[0] == "llama_cpp" for a in node.names):
            return True
        if isinstance(node, ast.ImportFrom) and node.level == 0 \
                and (node.module or "").split(".")[0] == "llama_cpp":
            return True
    return False


def test_llama_cpp_is_imported_only_by_the_engine_processes() -> None:
    """A stricter reading than the contracts (which see module-level imports too, but not every lazy one):
    inside app/, only modules under app/engine/llama/ import llama_cpp, lazily or not."""
    importers = sorted(p.relative_to(ROOT).as_posix() for p in (ROOT / "app").rglob("*.py")
                       if _imports_llama_cpp(p))
    assert importers, "no module imports llama_cpp: the check looks in the wrong place"
    assert [rel for rel in importers if not rel.startswith(LLAMA_SIDE)] == []


def _packages() -> list[str]:
    """Every package folder of app/, as 'core/gguf' (app/ itself left out)."""
    return sorted(p.parent.relative_to(ROOT / "app").as_posix() for p in (ROOT / "app").rglob("__init__.py")
                  if p.parent != ROOT / "app")


def test_the_map_names_every_package() -> None:
    """docs/architecture.md draws every package folder, and README's Architecture section names every top-level
    package: the layout, the map and the README say the same."""
    page = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    tree = page[page.index("```"):page.index("```", page.index("```") + 3)]
    drawn = set()
    stack: list[tuple[int, str]] = []
    for line in tree.splitlines()[1:]:
        name = line.strip().split(" ", 1)[0]
        if not name.endswith("/") or name == "app/":
            continue
        depth = len(line) - len(line.lstrip())
        while stack and stack[-1][0] >= depth:
            stack.pop()
        path = "/".join([s for _, s in stack] + [name.rstrip("/")])
        stack.append((depth, name.rstrip("/")))
        drawn.add(path)
    assert [p for p in _packages() if p not in drawn] == [], "packages missing from docs/architecture.md"
    assert [p for p in drawn if p not in _packages()] == [], "docs/architecture.md draws folders that are gone"
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    section = readme[readme.index("## Architecture"):]
    section = section[:section.index("\n## ", 3)]
    top = sorted({p.split("/")[0] for p in _packages()})
    assert [t for t in top if f"app/{t}/" not in section] == []


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
