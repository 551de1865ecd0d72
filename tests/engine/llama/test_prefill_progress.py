"""A long prompt's prefill reports its progress chunk by chunk (issue 32, prompt-processing progress): the
engine, on a small synthetic model with n_batch 32, sends PrefillProgress events before the first token,
their counts rising by a chunk each to the prompt's size; a prompt of one chunk sends none. The arithmetic
of the share and the time left is the event's own."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.engine import protocol as P
from synth_gguf import write_synthetic_gguf


def test_the_event_round_trips_and_predicts_the_time_left() -> None:
    ev = P.PrefillProgress("r", done=1024, total=4096, elapsed_ms=2000.0)
    assert P.decode(P.encode(ev)) == ev
    assert ev.fraction == pytest.approx(0.25)
    assert ev.left_ms == pytest.approx(6000.0)  # three more chunks of 1024 at the rate so far
    assert P.PrefillProgress("r", 0, 10, 0.0).left_ms is None


@pytest.mark.model
def test_the_engine_reports_each_chunk_before_the_first_token(tmp_path: Path) -> None:
    from app.engine.client import EngineClient

    model = write_synthetic_gguf(tmp_path / "tiny-F32.gguf", n_layers=1)
    with EngineClient() as engine:
        engine.load(P.LoadConfig(model_path=str(model), n_ctx=512, n_batch=32, n_ubatch=32, n_threads=1,
                                 warmup=False))
        prompt = "abcdefghij" * 20  # about 200 byte tokens: seven chunks of 32
        req = P.Generate(request_id="long", prompt=prompt,
                         sampling=P.Sampling(temperature=0.0, max_tokens=2, ignore_eos=True))
        events = list(engine.generate(req, timeout=300))
        kinds = [type(e).__name__ for e in events]
        progress = [e for e in events if isinstance(e, P.PrefillProgress)]
        assert progress and kinds.index("PrefillProgress") < kinds.index("Token")
        assert max(i for i, k in enumerate(kinds) if k == "PrefillProgress") < kinds.index("Token")
        total = events[-1].metrics["prefill_tokens"]
        assert {e.total for e in progress} == {total}
        assert [e.done for e in progress] == [min(32 * (i + 1), total) for i in range(len(progress))]
        assert progress[-1].done == total and len(progress) == -(-total // 32)
        assert all(b.elapsed_ms >= a.elapsed_ms for a, b in zip(progress, progress[1:], strict=False))
        short = P.Generate(request_id="short", prompt="hello there",  # one chunk: nothing to report
                           sampling=P.Sampling(temperature=0.0, max_tokens=2, ignore_eos=True))
        assert not [e for e in engine.generate(short, timeout=300) if isinstance(e, P.PrefillProgress)]
