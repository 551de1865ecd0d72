"""Machine identity has one home: app.core.predict.machine_identity (a hash for caches, a readable name for tuning)."""

from __future__ import annotations

import ast
import os
import platform
from pathlib import Path

from app.core.predict import autotune, hardware, machine_identity

APP = Path(__file__).resolve().parents[3] / "app"


def test_no_other_module_defines_a_machine_identity() -> None:
    names = {"machine_key", "tuning_machine", "cpu_name", "_cpu_name"}
    found = []
    for path in APP.rglob("*.py"):
        if path.name == "machine_identity.py":
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.FunctionDef) and node.name in names and not node.decorator_list:
                found.append(f"{path.relative_to(APP)}:{node.name}")
    assert found == []


def test_the_two_keys() -> None:
    hw = hardware.probe_hardware()
    assert hw.machine_key == machine_identity.machine_key(hw.cpu, hw.ram_total)
    assert len(hw.machine_key) == 16
    # the tune store's key keeps the form results were stored under
    assert autotune.tuning_machine() == f"{hardware.probe_cpu().model} x{os.cpu_count()} {platform.system()}"


def test_caches_key_changes_with_the_ram(monkeypatch: object) -> None:
    cpu = hardware.probe_cpu()
    assert machine_identity.machine_key(cpu, 16 << 30) != machine_identity.machine_key(cpu, 32 << 30)
