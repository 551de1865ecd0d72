"""One table of quantization types: bits/weight from gguf's block sizes, quality from the scoreboard."""

from __future__ import annotations

import gguf
import pytest

from app.core.gguf import quant_types
from app.core.hub import listing as hub
from app.core.predict import quality as quant_quality


@pytest.mark.parametrize("file_type", quant_types.PURE_TYPES)
def test_bits_of_single_type_files_are_gguf_block_sizes(file_type: str) -> None:
    block, type_size = gguf.GGML_QUANT_SIZES[gguf.GGMLQuantizationType[file_type]]
    assert quant_types.BITS[file_type] == 8 * type_size / block
    assert quant_types.bits_per_weight(file_type) == quant_types.BITS[file_type]


def test_every_type_named_after_a_ggml_type_takes_its_block_size() -> None:
    """A mix value typed by hand for a name that is a ggml type would hide gguf's exact one; llama.cpp's
    Q2_K file type is the one such name that is a mix (attention and output kept at Q4_K/Q6_K)."""
    ggml_names = {t.name for t in gguf.GGMLQuantizationType}
    assert ggml_names & set(quant_types.MIX_BITS) == {"Q2_K"}
    assert quant_types.BITS["Q2_K"] > quant_types.block_bits("Q2_K")


def test_hub_recommender_and_quantizer_read_one_table() -> None:
    for file_type in quant_types.BITS:
        assert hub.bits_per_weight(file_type) == quant_types.BITS[file_type]
        assert hub.bits_per_weight("UD-" + file_type) == quant_types.BITS[file_type]
        assert hub.quality_cost(file_type) == quant_quality.quality(file_type).kld
    assert quant_types.bits_per_weight("IQ3_S") == 3.4375  # 110 bytes per 256 weights
    for file_type, kld in quant_types.KLD.items():
        assert quant_quality.quality(file_type).kld == kld
        assert not quant_quality.quality(file_type).estimated


def test_mixes_are_wider_than_their_main_type() -> None:
    """Q4_K_M keeps some tensors at Q6_K: its file is wider than Q4_K blocks, narrower than Q6_K."""
    k_mixes = [m for m in quant_types.MIX_BITS if "_K_" in m]
    assert len(k_mixes) >= 10
    for mix in k_mixes:
        main = mix.split("_K_")[0] + "_K"
        assert quant_types.MIX_BITS[mix] >= quant_types.block_bits(main), mix
