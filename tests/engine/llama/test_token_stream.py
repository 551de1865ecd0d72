"""The engine's token writer: the first token leaves at once, later ones in bursts, none lost or merged."""

from __future__ import annotations

import pytest

from app.engine import protocol as P

# imports llama_cpp, a hard dependency: a broken install fails, never skips
from app.engine.llama.worker import engine as _engine  # noqa: F401
from app.engine.llama.worker import stream


def test_tokens_leave_in_bursts_with_their_own_timestamps(monkeypatch: pytest.MonkeyPatch) -> None:
    writes: list[list[str]] = []
    monkeypatch.setattr(stream, "send_lines", lambda lines: writes.append(list(lines)))
    out = stream.TokenOut(interval_s=0.025)
    for i, t in enumerate([10.000, 10.010, 10.020, 10.030, 10.040, 10.050]):
        out.add(P.Token("r", f"w{i}", i, t))
    # first token at once (the user's time to first token); then a write when 25 ms have passed
    assert [len(w) for w in writes] == [1, 3]
    out.flush()
    assert [len(w) for w in writes] == [1, 3, 2]
    events = [P.decode(line) for w in writes for line in w]
    assert [e.text for e in events] == [f"w{i}" for i in range(6)]
    assert [e.t for e in events] == pytest.approx([10.0, 10.01, 10.02, 10.03, 10.04, 10.05])
    out.flush()
    assert len(writes) == 3  # nothing pending: no empty write


def test_a_request_chooses_its_burst_interval_within_limits() -> None:
    assert stream.burst_interval_s(None) == stream.BURST_MS / 1000
    assert stream.burst_interval_s(66) == pytest.approx(0.066)
    assert stream.burst_interval_s(-5) == 0.0  # every token at once
    assert stream.burst_interval_s(10_000) == stream.MAX_BURST_MS / 1000  # tokens never wait long
    line = P.encode(P.Generate(request_id="r", prompt="hi", stream_interval_ms=66))
    assert P.decode(line).stream_interval_ms == 66


def _arrival_groups(client, interval_ms: int) -> tuple[int, int, int, float]:
    """(tokens, groups of tokens that reached the app together, writes the burst rule allows) for one greedy
    reply. The allowance comes from the tokens' own engine-side stamps: the first token at once, then one
    write whenever `interval_ms` has passed since the last, so it follows this machine's pace now."""
    import itertools
    import time

    req = P.Generate(request_id=client.new_request_id("b"), prompt="Count slowly from one to fifty:",
                     sampling=P.Sampling(temperature=0.0, max_tokens=40, seed=1, ignore_eos=True),
                     stream_interval_ms=interval_ms)
    stamped = [(time.monotonic(), e.t) for e in client.generate(req, timeout=300) if isinstance(e, P.Token)]
    arrivals = [a for a, _ in stamped]
    interval = interval_ms / 1000
    made = [t for _, t in stamped]
    pace = (made[-1] - made[0]) / max(len(made) - 1, 1)  # the engine's mean time per token, now
    # tokens of one write are parsed from one read, microseconds apart; separate writes are at least a
    # token's time apart: a gap over a quarter of the pace (this machine's, not a fixed number) splits
    groups = 1 + sum(1 for a, b in itertools.pairwise(arrivals) if b - a > pace / 4)
    writes, last = 0, None
    for _, made in stamped:
        if last is None or made - last >= interval:
            writes, last = writes + 1, made
    return len(arrivals), groups, writes, pace


@pytest.mark.model
def test_the_engine_sends_tokens_at_the_interval_the_request_asks_for(default_model) -> None:
    from app.engine.client import EngineClient

    with EngineClient() as client:
        client.load(P.LoadConfig(model_path=str(default_model), n_ctx=512))
        n, groups, writes, pace = _arrival_groups(client, stream.MAX_BURST_MS)
    assert n == 40
    # No more separate arrivals than the burst rule allows (slack for a descheduled reader): an engine that
    # wrote every token at once would show ~40 groups where a quiet machine allows ~4 (13 ms a token).
    assert groups <= writes * 1.5 + 2, (groups, writes, pace)
