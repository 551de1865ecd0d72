"""One list of KV cache types, offered the same everywhere; sizes from gguf's block sizes."""

from __future__ import annotations

import argparse
import typing

import gguf
import pytest

from app.core.config import settings
from app.core.gguf import kv_types
from app.core.predict import memory, recommend


@pytest.mark.parametrize("kv_type", kv_types.LLAMA_KV_TYPES)
def test_row_bytes_follow_gguf_block_sizes(kv_type: str) -> None:
    block, type_size = gguf.GGML_QUANT_SIZES[gguf.GGMLQuantizationType[kv_type.upper()]]
    assert memory.row_bytes(256, kv_type) == 256 // block * type_size


def test_known_sizes() -> None:
    assert [memory.row_bytes(64, t) for t in kv_types.KV_TYPES] == [128, 68, 36]  # f16, q8_0, q4_0
    with pytest.raises(ValueError, match="unknown KV cache type"):
        memory.row_bytes(64, "q3_k")


def _kv_choices(command: str) -> list[tuple[str, object]]:
    import importlib

    module = importlib.import_module(f"app.commands.{command}")
    parser = argparse.ArgumentParser()
    module.register(parser.add_subparsers())
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    found = []
    for action in sub.choices[command]._actions:
        if any(o in action.option_strings for o in ("--kv-type", "--cache-type-k", "--cache-type-v")):
            found.append((tuple(action.choices or ()), action.default))
    return found


@pytest.mark.parametrize("command", ["chat", "bench", "serve", "recommend"])
def test_every_command_offers_the_same_types(command: str) -> None:
    found = _kv_choices(command)
    # chat leaves the default to settings.json / the preset (app.core.predict.load_plan): None means "not given"
    default = None if command == "chat" else kv_types.DEFAULT_KV_TYPE
    assert found and all(c == (kv_types.KV_TYPES, default) for c in found)


def test_settings_and_recommender_offer_the_same_types() -> None:
    kv_field = settings.Settings.model_fields["kv_cache_type"]
    assert typing.get_args(kv_field.annotation) == kv_types.KV_TYPES
    assert kv_field.default == kv_types.DEFAULT_KV_TYPE
    assert recommend.KV_TYPES == kv_types.KV_TYPES
    assert list(kv_types.KV_TYPE_LABELS) == list(kv_types.KV_TYPES)


def test_library_column_names_the_same_types() -> None:
    from app.ui.models_page.library_columns import HEADERS

    assert "Max context f16 / q8_0 / q4_0" in HEADERS
