"""The engine's token writer: the first token leaves at once, later ones in bursts, none lost or merged."""

from __future__ import annotations

import pytest

from app.engine import protocol as P

worker = pytest.importorskip("app.engine.worker")  # imports llama_cpp


def test_tokens_leave_in_bursts_with_their_own_timestamps(monkeypatch: pytest.MonkeyPatch) -> None:
    writes: list[list[str]] = []
    monkeypatch.setattr(worker, "send_lines", lambda lines: writes.append(list(lines)))
    out = worker.TokenOut(interval_s=0.025)
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
