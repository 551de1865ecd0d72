"""One job per module: no module of app/ runs past 400 lines (the house rule; a longer one is split along a seam,
as view.py's live reply or the batch engine's slots were)."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MAX_LINES = 400


def too_long(root: Path, limit: int = MAX_LINES) -> list[str]:
    """The modules under `root` longer than `limit` lines, with their length."""
    found = []
    for path in sorted(root.rglob("*.py")):
        n = len(path.read_text(encoding="utf-8").splitlines())
        if n > limit:
            found.append(f"{path.relative_to(root.parent)}: {n} lines")
    return found


def test_no_app_module_is_over_400_lines() -> None:
    assert too_long(ROOT / "app") == []


def test_a_long_module_is_named(tmp_path: Path) -> None:
    pkg = tmp_path / "app"
    (pkg / "core").mkdir(parents=True)
    (pkg / "core" / "short.py").write_text("x = 1\n" * MAX_LINES)
    (pkg / "core" / "long.py").write_text("x = 1\n" * (MAX_LINES + 1))
    assert too_long(pkg) == [f"app/core/long.py: {MAX_LINES + 1} lines"]
