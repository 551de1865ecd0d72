"""The cards' durations and counts read as the context line's do: seconds past 10 s ("12.0 s", not "12040 ms")
and thousands separators ("3,126 tok"), for the reply's numbers at its first token and at its end."""

from __future__ import annotations

from typing import Any

import pytest

from app.core.metrics.phase import PhaseMetrics, fmt_duration
from app.engine import protocol as P
from chat_drive import send, tokens

pytestmark = pytest.mark.gui


@pytest.mark.parametrize(("ms", "text"), [(8.0, "8 ms"), (912.4, "912 ms"), (9870.0, "9,870 ms"),
                                          (12040.0, "12.0 s"), (21792.0, "21.8 s"), (1234567.0, "1,234.6 s")])
def test_a_duration_turns_to_seconds_past_ten(ms: float, text: str) -> None:
    assert fmt_duration(ms) == text


def test_the_cards_read_long_replies_in_seconds_and_separated_thousands(win: Any) -> None:
    rid = send(win, "a long one")
    win.engine._dispatch(P.Prefilled(rid, prompt_tokens=3285, prefill_tokens=3126, prefill_ms=14560.0,
                                     ttft_ms=21792.0, kv_cells_used=3285, kv_bytes_used=0, kv_bytes_per_cell=0.0))
    tokens(win, rid, "a", "b")
    d = win.dashboard
    assert d.card_prefill.detail.text() == "3,126 tok in 14.6 s"
    assert d.card_prompt.value.text() == "3,285" and d.card_prompt.detail.text() == "3,126 new · 159 reused"
    m = PhaseMetrics(prompt_tokens=3285, prefill_tokens=3126, prefill_ms=14560.0, ttft_ms=21792.0,
                     decode_tokens=224, decode_ms=12040.0, generated_tokens=225, itl_ms=[53.75] * 224,
                     reused_tokens=159, kv_cells_used=3509)
    win.engine._dispatch(P.Done(rid, "", "stop", m.to_dict()))
    assert d.card_ttft.value.text() == "21.8 s"
    assert d.card_prefill.detail.text() == "3,126 tok in 14.6 s"
    assert d.card_decode.detail.text() == "224 tok in 12.0 s"
    assert d.card_prompt.value.text() == "3,285"
    assert d.card_kv.value.text() == "3,509 tok"
