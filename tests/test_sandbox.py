"""The test run's own sandbox: the shared default-model fixture assembles the model inside this run's temporary
folders, never in the user's data folder (the old conftest assembled it before ROOFLINE_HOME was set)."""

from __future__ import annotations

from pathlib import Path

import pytest


def test_the_default_model_is_assembled_inside_the_test_run(default_model: Path,
                                                            tmp_path_factory: pytest.TempPathFactory) -> None:
    base = tmp_path_factory.getbasetemp().resolve()
    assert default_model.resolve().is_relative_to(base), f"{default_model} is outside this run's {base}"
