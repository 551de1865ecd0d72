"""serve_traffic reads /metrics through the remote normalizer's parser (prometheus_client's): labelled
samples count, buckets stay out, and a text the parser refuses gives an empty snapshot, not an exception."""

from __future__ import annotations

from app.core.metrics.serve_traffic import parse_metrics, traffic

TEXT = """# TYPE llamacpp:tokens_predicted_total counter
llamacpp:tokens_predicted_total{slot="0"} 30
llamacpp:tokens_predicted_total{slot="1"} 12
# TYPE llamacpp:requests_processing gauge
llamacpp:requests_processing 2
# TYPE llamacpp:time_to_first_token_seconds histogram
llamacpp:time_to_first_token_seconds_bucket{le="0.1"} 1
llamacpp:time_to_first_token_seconds_bucket{le="+Inf"} 3
llamacpp:time_to_first_token_seconds_sum 0.6
llamacpp:time_to_first_token_seconds_count 3
"""


def test_labelled_samples_are_summed_and_buckets_left_out():
    m = parse_metrics(TEXT)
    assert m["llamacpp:tokens_predicted_total"] == 42
    assert m["llamacpp:time_to_first_token_seconds_count"] == 3
    assert not any(name.endswith("_bucket") for name in m)
    t = traffic(m, 1.0)
    assert (t.processing, t.tokens_total) == (2, 42)


def test_a_text_the_parser_refuses_is_an_empty_snapshot():
    assert parse_metrics("llamacpp:requests_processing 2\nthis is { not prometheus\n") == {}
    assert traffic(parse_metrics("\x00garbage{{{"), 1.0).processing == 0
