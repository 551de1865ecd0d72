"""The test run's own sandbox: the shared default-model fixture assembles the model inside this run's temporary
folders, never in the user's data folder (the old conftest assembled it before ROOFLINE_HOME was set)."""

from __future__ import annotations

from pathlib import Path

import pytest


def test_the_default_model_is_assembled_inside_the_test_run(default_model: Path,
                                                            tmp_path_factory: pytest.TempPathFactory) -> None:
    base = tmp_path_factory.getbasetemp().resolve()
    assert default_model.resolve().is_relative_to(base), f"{default_model} is outside this run's {base}"


# Literals naming a place under /tmp that tests may hold: hostile names a download must refuse, only checked for
# absence or handed to the settings validator, never written.
TMP_LITERALS_ALLOWED = {"/tmp/evil-Q8_0.gguf", "/tmp/\\u0000models"}


def test_no_test_names_a_fixed_folder_under_tmp() -> None:
    """Tests write into pytest's tmp_path; a fixed /tmp path is shared with other runs and users and outlives the
    run (test_models_page_ui once saved screenshots to /tmp/roofline-shots)."""
    import ast

    found = []
    for path in sorted(Path(__file__).parent.rglob("*.py")):
        if path.name == Path(__file__).name:  # this file names the old folder in its docstring
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Constant) and isinstance(node.value, (str, bytes)):
                text = node.value.decode("utf-8", "replace") if isinstance(node.value, bytes) else node.value
                for word in text.replace('"', " ").split():
                    if word.startswith("/tmp") and word not in TMP_LITERALS_ALLOWED:
                        found.append(f"{path.name}: {word}")
    assert not found, found
