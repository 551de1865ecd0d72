"""Live where the dashboard says live: the engine reports prefill at the first token (same numbers as the
reply's final metrics), the window shows them then and grows the KV card with the streamed tokens; a load
warms the engine up without leaving anything in the cache or the counters."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from app.engine import protocol as P
from fake_engine import gemma_loaded


def test_prefilled_round_trips_and_the_live_kv_arithmetic() -> None:
    from app.ui.dashboard.live_numbers import kv_texts, live_kv, prefill_texts

    ev = P.Prefilled("r1", prompt_tokens=120, prefill_tokens=40, prefill_ms=80.0, ttft_ms=95.0, kv_cells_used=120,
                     kv_bytes_used=120 * 18432, kv_bytes_per_cell=18432.0)
    assert P.decode(P.encode(ev)) == ev and ev.prefill_tps == pytest.approx(500.0)
    (pv, pd), (tv, td, tip) = prefill_texts(ev)
    assert (pv, pd, tv, td, tip) == ("500 tok/s", "40 tok in 80 ms", "120", "40 new · 80 reused", "40 new · 80 reused")
    loaded = gemma_loaded(metadata={})
    assert live_kv(ev, 1, loaded).cells_used == 120  # the first token came out of the prefill
    kv = live_kv(ev, 11, loaded)  # ten decode steps each stored their predecessor
    assert (kv.cells_used, kv.bytes_used, kv.headroom) == (130, 130 * 18432, 4096 - 130)
    assert live_kv(ev, 10_000, loaded).cells_used == 4096  # never past what is allocated
    assert kv_texts(kv, "f16", "f16")[0] == "130 tok"
    nothing_new = P.Prefilled("r2", 50, 0, 0.0, 10.0, 50, 0, 0.0)
    assert prefill_texts(nothing_new)[0] == ("—", "nothing new to evaluate")


@pytest.mark.gui
def test_dashboard_shows_prefill_at_the_first_token_and_grows_the_kv_card(qtbot: Any) -> None:
    from app.ui.dashboard import Dashboard
    from app.ui.engine_link.engine_qt import EngineQt

    engine = EngineQt()
    dash = Dashboard(engine)
    qtbot.addWidget(dash)
    dash.set_loaded(gemma_loaded(metadata={}))
    dash.start_reply()
    assert dash.card_prefill.value.text() == "…"
    engine.prefilled.emit(P.Prefilled("r", 120, 40, 80.0, 95.0, 120, 120 * 18432, 18432.0))
    assert dash.card_prefill.value.text() == "500 tok/s" and dash.card_prompt.detail.text() == "40 new · 80 reused"
    dash.on_tokens([0.0])  # the first token: the live refresh must not wipe the prefill numbers
    assert dash.card_prefill.value.text() == "500 tok/s" and dash.card_kv.value.text() == "120 tok"
    dash.on_tokens([0.02, 0.04, 0.06])
    qtbot.waitUntil(lambda: dash.card_kv.value.text() == "123 tok", timeout=2000)
    assert dash.kv_bar.value() == 123 and "growing live" in dash.kv_label.text()


@pytest.mark.model
def test_engine_sends_prefill_at_the_first_token_and_warms_up(default_model: Path) -> None:
    from app.engine.client import EngineClient

    with EngineClient() as engine:
        loaded = engine.load(P.LoadConfig(model_path=str(default_model), n_ctx=512, n_threads=2))
        stats = engine.stats()  # answered after the warm-up that follows Loaded
        assert stats.warmup_ms > 0 and stats.kv_cells_used == 0  # it ran, and left nothing in the cache
        req = P.Generate(request_id="g", prompt="The capital of France is",
                         sampling=P.Sampling(temperature=0.0, max_tokens=6, ignore_eos=True))
        events = list(engine.generate(req, timeout=300))
        kinds = [type(e).__name__ for e in events]
        assert kinds.index("Prefilled") < kinds.index("Token")  # before the first token reaches the window
        pre = next(e for e in events if isinstance(e, P.Prefilled))
        m = events[-1].metrics
        assert m["reused_tokens"] == 0  # the warm-up's tokens are not mistaken for a cached prefix
        assert m["prefill_tokens"] == m["prompt_tokens"]  # nor counted in the first reply's prefill
        assert (pre.prompt_tokens, pre.prefill_tokens) == (m["prompt_tokens"], m["prefill_tokens"])
        assert pre.prefill_ms == pytest.approx(m["prefill_ms"]) and pre.ttft_ms == pytest.approx(m["ttft_ms"])
        assert pre.kv_cells_used == m["prompt_tokens"]
        assert pre.kv_bytes_per_cell == loaded.kv_bytes_allocated / loaded.kv_cells_allocated
        engine.load(P.LoadConfig(model_path=str(default_model), n_ctx=512, n_threads=2, warmup=False))
        assert engine.stats().warmup_ms == 0.0
