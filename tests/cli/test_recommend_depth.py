"""`roofline recommend --depth D`: a decode column per depth, from the depth model (app.core.predict.depth), in
the table and in --json."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from app.cli import main
from app.core.bench.zoo import zoo_path


@pytest.fixture(scope="module")
def models(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    d = tmp_path_factory.mktemp("zoo")
    return [zoo_path("llama-3.2-1b", q, d) for q in ("Q4_K_M", "Q8_0")]


def test_depth_columns_in_json_fall_with_depth(models: list[Path], capsys: Any) -> None:
    assert main(["recommend", "-m", *map(str, models), "--ctx", "8192", "--depth", "2048,16384", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    for v in data["variants"]:
        deep = v["decode_tps_at_depth"]
        assert set(deep) == {"2048", "16384"}
        assert v["decode_tps"] > deep["2048"] > deep["16384"] > 0  # the depth-0 column is the fastest


def test_depth_columns_in_the_table(models: list[Path], capsys: Any) -> None:
    assert main(["recommend", "-m", str(models[0]), "--ctx", "8192", "-d", "32768"]) == 0
    out = capsys.readouterr().out
    header = next(line for line in out.splitlines() if line.startswith("variant"))
    assert header.endswith("  decode     @32k  quality")
    row = next(line for line in out.splitlines() if line.startswith("★"))
    assert row.count("/s") == 3  # prefill, decode, decode at 32k
    assert "@D: predicted decode tok/s with D tokens already in the context" in out


def test_without_depth_no_column(models: list[Path], capsys: Any) -> None:
    assert main(["recommend", "-m", str(models[0]), "--ctx", "8192"]) == 0
    out = capsys.readouterr().out
    assert "@" not in next(line for line in out.splitlines() if line.startswith("variant"))


def test_a_bad_depth_is_one_line(models: list[Path], capsys: Any) -> None:
    with pytest.raises(SystemExit):
        main(["recommend", "-m", str(models[0]), "--depth", "lots"])
    assert "expected comma-separated whole numbers" in capsys.readouterr().err
