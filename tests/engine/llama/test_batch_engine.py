"""The batch engine process on the real default model, without HTTP: chunked prefill interleaves with a
running decode, a prompt extending another slot's tokens reuses that slot's cells, a request cancelled
while its prompt is tokenized ends cancelled, and a prompt past the byte bound is refused untokenized."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from app.engine import protocol as P
from app.engine.batch.client import BatchEngineClient
from app.engine.batch.messages import Accepted

pytestmark = pytest.mark.model

UBATCH = 128


class Engine:
    def __init__(self, model: Path) -> None:
        self.events: list[Any] = []
        self.client = BatchEngineClient(2)
        self.loaded_config = P.LoadConfig(model_path=str(model), n_ctx=2048, n_threads=2, n_batch=512,
                                          n_ubatch=UBATCH)
        self.loaded = self.client.start_loaded(self.loaded_config, self.events.append)

    def submit(self, rid: str, prompt: str, **sampling: Any) -> None:
        self.client.send(P.Generate(request_id=rid, prompt=prompt, sampling=P.Sampling(**sampling)))

    def wait(self, ok: Any, timeout: float = 180.0) -> None:
        deadline = time.monotonic() + timeout
        while not ok() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert ok(), [e for e in self.events if isinstance(e, P.Error)]

    def of(self, rid: str, kind: type) -> list[Any]:
        return [e for e in list(self.events) if isinstance(e, kind) and getattr(e, "request_id", None) == rid]

    def done(self, rid: str) -> P.Done:
        self.wait(lambda: self.of(rid, P.Done))
        return self.of(rid, P.Done)[0]  # type: ignore[no-any-return]


@pytest.fixture(scope="module")
def engine(default_model: Path) -> Iterator[Engine]:
    e = Engine(default_model)
    yield e
    e.client.close()


LONG = " ".join(f"item {i} is a word;" for i in range(75))  # ~450 tokens: several ubatch chunks


def test_long_prompt_is_prefilled_in_chunks_between_the_others_tokens(engine: Engine) -> None:
    engine.submit("a", "Once upon a time", max_tokens=400, ignore_eos=True, temperature=0.0)
    engine.wait(lambda: len(engine.of("a", P.Token)) >= 2)
    engine.submit("b", LONG, max_tokens=1, temperature=0.0)
    b = engine.done("b")
    n_prompt = engine.of("b", Accepted)[0].prompt_tokens
    assert n_prompt > 3 * UBATCH
    # each step carries a's token and at most UBATCH - 1 of b's prompt tokens
    assert b.metrics["prefill_steps"] >= n_prompt / (UBATCH - 1)
    during = [t for t in engine.of("a", P.Token) if b.metrics["t_admit"] < t.t < b.metrics["t_first"]]
    assert len(during) >= 3  # a kept streaming while b's prompt went in, one token per chunk
    engine.client.send(P.Cancel("a"))
    assert engine.done("a").finish_reason == "cancelled"


def test_prompt_extending_a_running_sequence_shares_its_cells(engine: Engine) -> None:
    base = "The history of the city began with a small village by the river, where farmers and fishermen"
    engine.submit("alone", base + " lived together", max_tokens=6, temperature=0.0)
    alone = engine.done("alone")
    engine.submit("other", "Unrelated text so that the other slot holds something else", max_tokens=2)
    engine.done("other")
    # "runner" takes the slot without a useful cache; "ext" then finds its prefix in runner's slot
    engine.submit("runner", base + " traded", max_tokens=200, ignore_eos=True, temperature=0.0)
    engine.wait(lambda: len(engine.of("runner", P.Token)) >= 2)
    engine.submit("ext", base + " lived together", max_tokens=6, temperature=0.0)
    ext = engine.done("ext")
    assert ext.metrics["cache_n"] >= 16  # the shared prefix came from the running slot's cells
    assert ext.metrics["prompt_n"] + ext.metrics["cache_n"] == ext.metrics["prompt_tokens"]
    assert ext.text.split()[:2] == alone.text.split()[:2]  # and it reads the same as the prompt alone
    engine.client.send(P.Cancel("runner"))
    engine.done("runner")


def test_the_batch_engine_runs_under_the_chat_engines_memory_limit(engine: Engine, default_model: Path) -> None:
    """It is the same EngineClient underneath: the address-space limit sized from the model applies here too."""
    from app.engine import limits

    if not limits.supported() or engine.client.ready is None or engine.client.ready.gpu_offload:
        pytest.skip("RLIMIT_AS is applied on Linux without a GPU backend only (documented)")
    pid = engine.client.pid
    assert pid is not None
    expected = limits.address_space_for(str(default_model), engine.loaded_config)

    def limit() -> str:
        line = next(ln for ln in Path(f"/proc/{pid}/limits").read_text().splitlines()
                    if ln.startswith("Max address space"))
        return line.split()[3]

    deadline = time.monotonic() + 60  # sized on a thread of its own, beside the load
    while limit() == "unlimited" and time.monotonic() < deadline:
        time.sleep(0.05)
    assert limit() != "unlimited" and int(limit()) == expected


def test_drop_caches_frees_the_idle_slots_cells_and_keeps_the_running_ones(engine: Engine) -> None:
    from app.engine.batch.messages import BatchStats, DropCaches

    def stats() -> BatchStats:
        n = len(engine.events)
        engine.client.send(P.GetStats())
        engine.wait(lambda: any(isinstance(e, BatchStats) for e in engine.events[n:]))
        return [e for e in engine.events[n:] if isinstance(e, BatchStats)][-1]

    engine.submit("cached", "A prompt whose cells stay behind as the slot's cache", max_tokens=4, temperature=0.0)
    engine.done("cached")
    engine.submit("running", "Once upon a time", max_tokens=400, ignore_eos=True, temperature=0.0)
    engine.wait(lambda: len(engine.of("running", P.Token)) >= 2)
    before = stats()
    assert before.kv_tokens > before.kv_tokens_running > 0  # the finished request's prefix is cached
    engine.client.send(DropCaches())
    after = stats()
    assert after.kv_tokens == after.kv_tokens_running > 0  # only the running sequence's cells are left
    engine.client.send(P.Cancel("running"))
    engine.done("running")


def test_a_prompt_cancelled_while_it_is_tokenized_ends_cancelled_and_is_never_accepted(engine: Engine) -> None:
    # 48 kB: under the byte bound (1024 tokens x 48 bytes), so it goes to the tokenizer thread; the
    # Cancel right behind it reaches the main loop while the thread is still at it
    engine.submit("late", "hello world " * 4000, max_tokens=400, ignore_eos=True)
    engine.client.send(P.Cancel("late"))
    assert engine.done("late").finish_reason == "cancelled"
    assert not engine.of("late", Accepted) and not engine.of("late", P.Error) and not engine.of("late", P.Token)


def test_the_stats_carry_the_byte_bound_and_a_longer_prompt_is_refused_untokenized(engine: Engine) -> None:
    from app.engine.batch.messages import BatchStats

    def bound() -> int:
        engine.client.send(P.GetStats())
        time.sleep(0.05)
        stats = [e for e in list(engine.events) if isinstance(e, BatchStats)]
        return stats[-1].max_prompt_bytes if stats else 0

    engine.wait(lambda: bound() > 0)
    assert bound() == 1024 * 48  # the slot's tokens x the default model's longest token (48 bytes)
    engine.submit("huge", "x" * (bound() + 1), max_tokens=4)
    engine.wait(lambda: engine.of("huge", P.Error))
    error = engine.of("huge", P.Error)[0]
    assert error.kind == "bad_request" and f"{1024 * 48 + 1} bytes" in error.message
