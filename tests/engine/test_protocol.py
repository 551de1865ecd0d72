"""The engine protocol: every message survives encode/decode; garbage is rejected with ProtocolError."""

from __future__ import annotations

import pytest

from app.engine import protocol as P


@pytest.mark.parametrize("msg", [
    P.Load(P.LoadConfig(model_path="/m.gguf", n_ctx=1024, type_k="q8_0")),
    P.Generate(request_id="r1", messages=[{"role": "user", "content": "hi"}],
               sampling=P.Sampling(temperature=0.0, stop=["\n"])),
    P.Generate(request_id="r2", prompt="Once", prompt_lookup=True),
    P.Cancel("r1"), P.Unload(), P.GetStats(), P.Shutdown(), P.Bench("b", n_prompt=512, repetitions=3),
    P.Token("r1", "wörd", 3, 12.5), P.Error(None, "engine_died", "gone", fatal=True),
    P.Done("r1", "text", "stop", {"prefill_tokens": 3}),
])
def test_roundtrip(msg: object) -> None:
    back = P.decode(P.encode(msg))
    assert back == msg
    assert type(back) is type(msg)


@pytest.mark.parametrize("line", ["", "not json", "[]", '{"type": "nope"}', '{"type": "cancel", "x": 1}',
                                  '{"no_type": 1}'])
def test_garbage_is_a_protocol_error(line: str) -> None:
    with pytest.raises(P.ProtocolError):
        P.decode(line)
