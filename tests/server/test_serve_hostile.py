"""`roofline serve` on the real default model against hostile clients: a 32 MB prompt (raw and chat) is
refused in one line while another client's stream keeps flowing; a prompt under the byte bound but over
the slot is refused by the engine's bounded tokenizing; a cached prefix is neither reused nor reported
across cache_salts; and an engine whose model file went away comes back by itself once the file does."""

from __future__ import annotations

import json
import statistics
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import openai
import psutil
import pytest

from reliability_plugin import record
from served import Served, open_stream, serve, sse_events

pytestmark = pytest.mark.model

HOSTILE = "hello world " * 2_700_000  # 32 MB: under the body limit, far over any slot


@pytest.fixture(scope="module")
def served(default_model: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    with serve(default_model, tmp_path_factory.mktemp("serve-home"), "--parallel", "2", "--ctx", "2048") as s:
        yield s


class Stream:
    """A long stream on another thread, with each event's arrival time."""

    def __init__(self, served: Served) -> None:
        self.times: list[float] = []
        self.conn, self.resp = open_stream(served, {"prompt": "Once upon a time", "max_tokens": 1000,
                                                    "ignore_eos": True, "temperature": 0})
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()

    def _read(self) -> None:
        try:
            for event in sse_events(self.resp):
                self.times.append(time.monotonic())
                if event == "[DONE]":
                    return
        except (OSError, AttributeError, ValueError):  # closed by the test when it is done
            return

    def wait_tokens(self, n: int) -> None:
        deadline = time.monotonic() + 120
        while len(self.times) < n and time.monotonic() < deadline:
            time.sleep(0.02)
        assert len(self.times) >= n

    def longest_gap(self, start: float, end: float) -> float:
        """The longest wait for an event between `start` and `end` (the ends count as events)."""
        inside = [start, *(t for t in self.times if start < t < end), end]
        return max(b - a for a, b in zip(inside, inside[1:], strict=False))

    def typical_gap(self, before: float) -> float:
        """The median wait between the stream's events before `before`: its own decode pace."""
        seen = [t for t in self.times if t < before]
        return statistics.median(b - a for a, b in zip(seen, seen[1:], strict=False))

    def close(self) -> None:
        if self.conn.sock:
            self.conn.sock.close()
        self.conn.close()


def post(served: Served, path: str, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    status, raw = served.raw("POST", path, json.dumps(body).encode())
    return status, json.loads(raw)


def test_a_32mb_prompt_is_refused_without_stalling_another_stream(served: Served) -> None:
    served.client().completions.create(model=served.model, prompt="Warm", max_tokens=1)  # the bound is known
    stream = Stream(served)
    try:
        stream.wait_tokens(12)
        start = time.monotonic()
        step = stream.typical_gap(start)
        with pytest.raises(openai.APIStatusError) as err:  # read, neither kept nor parsed: too big for any slot
            served.client().completions.create(model=served.model, prompt=HOSTILE, max_tokens=4)
        assert err.value.status_code == 413 and err.value.code == "context_length_exceeded"
        status, body = post(served, "/v1/chat/completions", {"messages": [{"role": "user", "content": HOSTILE}]})
        assert status == 413 and body["error"]["code"] == "context_length_exceeded"
        record("hostile inputs refused", 2)
        end = time.monotonic()
        stream.wait_tokens(len([t for t in stream.times if t <= end]) + 3)  # it goes on afterwards
        gap = stream.longest_gap(start, end)
        # The other stream stalled for 60-100 s before (over a thousand decode steps); now it waits a few steps.
        # Held to its own pace measured just before, not to a clock: a busy machine slows both alike.
        assert gap < 30 * step, (gap, step, end - start)
    finally:
        stream.close()


def test_a_prompt_over_the_byte_bound_is_refused_before_the_engine(served: Served) -> None:
    text = "hello world " * 6000  # 72 kB of text: more than 1024 tokens of at most 48 bytes could spell
    status, body = post(served, "/v1/completions", {"prompt": text, "max_tokens": 4})
    assert status == 400 and body["error"]["code"] == "context_length_exceeded"
    assert "72000 bytes" in body["error"]["message"]


def test_a_prompt_under_the_byte_bound_but_over_the_slot_is_refused_by_the_engine(served: Served) -> None:
    text = "hello world " * 3000  # 36 kB: fewer bytes than a 1024-token slot could spell, far more tokens
    with pytest.raises(openai.BadRequestError) as err:
        served.client().completions.create(model=served.model, prompt=text, max_tokens=4)
    assert err.value.code == "context_length_exceeded" and "1024" in err.value.message
    assert served.client().completions.create(model=served.model, prompt="Hi", max_tokens=2).choices


def test_a_cached_prefix_is_reused_only_under_the_same_cache_salt(served: Served) -> None:
    secret = "The launch code of the secret project is 7 4 1 9 and the password is swordfish. " * 2

    def cached(salt: str) -> int:
        r = served.client().completions.create(model=served.model, prompt=secret + "Repeat:", max_tokens=2,
                                               temperature=0, extra_body={"cache_salt": salt})
        return int(r.usage.prompt_tokens_details.cached_tokens)

    served.wait_metric("llamacpp:requests_processing", lambda v: v == 0)
    assert cached("alice") == 0
    assert cached("mallory") == 0  # alice's prefix is neither reused for nor reported to another salt
    assert cached("alice") > 16  # her own is


def test_the_engine_comes_back_once_its_model_file_does(default_model: Path, tmp_path: Path) -> None:
    link = tmp_path / "model.gguf"
    link.symlink_to(default_model)
    with serve(link, tmp_path / "home", "--parallel", "1", "--ctx", "512") as s:
        link.unlink()
        psutil.Process(s.engine_pid()).kill()
        deadline, failed = time.monotonic() + 120, b'{"status":"unavailable","error":"engine restart failed, retrying"}'
        while s.raw("GET", "/health", key=None)[1] != failed:  # and no path in it
            assert time.monotonic() < deadline
            time.sleep(0.2)
        with pytest.raises(openai.APIStatusError) as err:
            s.client().completions.create(model=s.model, prompt="Hi", max_tokens=2)
        assert err.value.status_code == 503 and str(tmp_path) not in err.value.message
        link.symlink_to(default_model)
        while s.raw("GET", "/health", key=None)[0] != 200:
            assert time.monotonic() < deadline
            time.sleep(0.2)
        assert s.client().completions.create(model=s.model, prompt="Hi", max_tokens=2).choices
