"""A remote GPU's roofs as typed in the Connect dialog: numbers or one clear line, empty for unknown, and
saved with the server in settings.json."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.core.config.settings import Settings, load_settings, save_settings
from app.core.remote.roof_entry import (
    MAX_BANDWIDTH_GBS,
    RemoteServerRoofs,
    RoofEntryError,
    parse_entry,
    parse_roofs,
    server_key,
)


@pytest.mark.parametrize("text, value", [("3350", 3350.0), (" 3350 GB/s ", 3350.0), ("4.8e3", 4800.0),
                                         ("", None), ("   ", None), ("gb/s", None)])
def test_numbers_and_empty(text: str, value: float | None) -> None:
    assert parse_entry(text, "GPU memory bandwidth", "GB/s", "3350", MAX_BANDWIDTH_GBS) == value


@pytest.mark.parametrize("text", ["fast", "3,350", "0", "-1", "nan", "inf", "1e9", "3350 MB/s"])
def test_bad_input_is_one_line_naming_the_field(text: str) -> None:
    with pytest.raises(RoofEntryError) as err:
        parse_entry(text, "GPU memory bandwidth", "GB/s", "3350", MAX_BANDWIDTH_GBS)
    line = str(err.value)
    assert line.startswith("GPU memory bandwidth") and "\n" not in line and "3350" in line


def test_both_fields_in_bytes_and_flops() -> None:
    r = parse_roofs("3350", "989")
    assert (r.bandwidth, r.peak_flops) == (3350e9, 989e12) and not r.empty
    assert parse_roofs("", "").empty and parse_roofs("", "").bandwidth is None
    with pytest.raises(RoofEntryError, match="^Peak compute"):
        parse_roofs("3350", "lots")


def test_saved_with_the_server_in_settings(tmp_path: Path) -> None:
    path = tmp_path / "settings.json"
    s = Settings()
    s.remote_servers = {server_key(" http://gpu-box:8000/ "): RemoteServerRoofs(bandwidth_gbs=3350.0)}
    save_settings(s, path)
    back = load_settings(path)
    assert back.warning is None
    assert back.settings.remote_servers["http://gpu-box:8000"].bandwidth_gbs == 3350.0
    assert back.settings.remote_servers["http://gpu-box:8000"].peak_tflops is None


def test_the_models_size_both_or_neither_and_plausible() -> None:
    r = parse_roofs("", "", "8.03B", "16.06")
    assert (r.n_params, r.model_bytes) == (8_030_000_000, 16_060_000_000) and not r.empty
    assert parse_roofs("", "", "70.6 billion", "141").params_b == 70.6
    for params, weights in (("8", ""), ("", "16")):
        with pytest.raises(RoofEntryError, match="^Model size: enter both"):
            parse_roofs("", "", params, weights)
    with pytest.raises(RoofEntryError, match="no format has"):
        parse_roofs("", "", "8000", "16")  # millions typed as billions
    with pytest.raises(RoofEntryError, match="^GPU memory bandwidth"):  # the fields in the dialog's order
        parse_roofs("x", "y", "8", "")
