"""The exposition reader: prometheus_client's parser, label sets summed, hostile text refused in one line."""

from __future__ import annotations

import pytest

from app.core.remote.engines import SPECS, VLLM
from app.core.remote.exposition import MAX_METRICS_BYTES, MAX_SAMPLES, ExpositionError, read_exposition
from app.core.remote.measures import measure

TWO_ENGINES = """# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{engine="0",model_name="m"} 3
vllm:num_requests_running{engine="1",model_name="m"} 4
# TYPE vllm:kv_cache_usage_perc gauge
vllm:kv_cache_usage_perc{engine="0",model_name="m"} 0.2
vllm:kv_cache_usage_perc{engine="1",model_name="m"} 0.6
"""


def test_label_sets_add_up_and_fractions_average():
    m = measure(SPECS[VLLM], read_exposition(TWO_ENGINES, 1.0))
    assert m.running == 7
    assert m.kv_fraction == pytest.approx(0.4)


@pytest.mark.parametrize("text", ['vllm:x{engine="0" 1\n', "a b c d e\n", 'x{le="1"} one\n', "\x00\x01 2\n"])
def test_malformed_text_is_one_line(text):
    with pytest.raises(ExpositionError) as err:
        read_exposition(text)
    assert "\n" not in str(err.value) and "Prometheus" in str(err.value)


def test_too_large_and_too_many():
    with pytest.raises(ExpositionError, match="larger than"):
        read_exposition("x 1\n" * (MAX_METRICS_BYTES // 4 + 1))
    with pytest.raises(ExpositionError, match="samples"):
        read_exposition("".join(f"m{i} 1\n" for i in range(MAX_SAMPLES + 1)))


def test_hostile_values_are_left_out_with_a_note():
    text = ("vllm:num_requests_running NaN\nvllm:num_requests_waiting -5\nvllm:kv_cache_usage_perc 7.5\n"
            "vllm:prompt_tokens_total 1e400\n")
    m = measure(SPECS[VLLM], read_exposition(text))
    assert m.running is None and m.waiting is None and m.kv_fraction is None
    assert any("not a fraction" in n for n in m.notes)
    assert any("samples" in n for n in m.notes)

