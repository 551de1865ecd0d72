"""EngineQt's token batching and event hand-off, driven the way the client drives it: events pushed from a
foreign (reader) thread at a rate far above 60/s. No engine process is needed for this part."""

from __future__ import annotations

import threading
import time

from app.engine import protocol as P
from app.ui.engine_link import engine_qt as E


def test_tokens_from_a_reader_thread_arrive_batched_in_order(qtbot):
    engine = E.EngineQt()
    batches: list[tuple[float, str, int]] = []
    engine.tokens.connect(lambda rid, text, times: batches.append((time.monotonic(), text, len(times))))
    done: list[P.Done] = []
    engine.done.connect(done.append)
    engine._active_request = "r1"  # what generate() sets after sending the request
    engine._batch.start()
    n = 600

    def reader() -> None:  # like EngineClient's reader thread: 600 tokens at ~3000/s, then Done
        for i in range(n):
            engine._on_reader_event(P.Token("r1", f"{i},", i, time.monotonic()))
            time.sleep(0.0003)
        engine._on_reader_event(P.Done("r1", "", "length", {}))

    thread = threading.Thread(target=reader)
    start = time.monotonic()
    thread.start()
    qtbot.waitUntil(lambda: bool(done), timeout=10_000)
    thread.join()
    span = time.monotonic() - start
    text = "".join(b[1] for b in batches)
    assert text == "".join(f"{i}," for i in range(n))  # nothing lost, nothing reordered, Done came last
    assert sum(b[2] for b in batches) == n
    assert len(batches) <= span / (E.TOKEN_BATCH_MS / 1000) + 2  # ≤ ~60 updates/s however fast tokens come
    assert len(batches) < n / 5
    assert engine.state == E.IDLE and engine.active_request is None and not engine._batch.isActive()


def test_fatal_error_from_reader_thread_sets_dead_once(qtbot):
    engine = E.EngineQt()
    errors: list[P.Error] = []
    states: list[str] = []
    engine.error.connect(errors.append)
    engine.state_changed.connect(states.append)
    engine._active_request = "r1"
    threading.Thread(target=engine._on_reader_event,
                     args=(P.Error(None, "engine_died", "The engine process was stopped by SIGKILL", True),)).start()
    qtbot.waitUntil(lambda: bool(errors), timeout=5000)
    assert states == [E.DEAD] and engine.active_request is None and engine.loaded_info is None
    assert not engine.request_stats()  # nothing is sent to a dead engine


def test_send_to_a_stopped_engine_reports_instead_of_raising(qtbot):
    engine = E.EngineQt()
    with qtbot.waitSignal(engine.error, timeout=2000) as blocker:
        engine.cancel("nothing")  # not running: silently nothing
        engine.generate(P.Generate(request_id="x", prompt="hi"))  # not running: one error, later
    err = blocker.args[0]
    assert err.kind == "engine_died" and err.fatal and engine.state == E.DEAD


def test_the_windows_engine_is_started_below_normal_priority(qtbot):
    from app.ui.engine_link.engine_qt import ENGINE_NICE, EngineQt

    engine = EngineQt()
    assert ENGINE_NICE > 0 and engine.client.nice == ENGINE_NICE


def test_pacing_follows_whether_llama_cpp_leaves_a_core_free(qtbot, monkeypatch):
    """Where llama.cpp's threads take every CPU the window updates half as often (its drawing would be
    taken from decoding); with a core to spare, or a remote server, it streams at full rate."""
    from app.core.chat.pacing import ROOMY, SHARED, view_pacing
    from fake_engine import gemma_loaded as _loaded

    assert view_pacing(2, 2) == SHARED and view_pacing(4, 2) == SHARED
    assert view_pacing(2, 4) == ROOMY and view_pacing(None, 2) == ROOMY and view_pacing(2, None) == ROOMY
    assert SHARED.text_ms > ROOMY.text_ms and SHARED.histogram_ms > ROOMY.histogram_ms
    assert 1000 / ROOMY.text_ms <= 60 and "every core" in SHARED.describe()
    monkeypatch.setattr(E.os, "cpu_count", lambda: 2)
    engine = E.EngineQt()
    seen: list[object] = []
    engine.loaded.connect(seen.append)
    blocks = {"gemma3.block_count": "18"}
    for loaded, want in ((_loaded(n_threads=2), SHARED), (_loaded(n_threads=1), ROOMY),
                         (_loaded(n_threads=2, chat_template_source="server"), ROOMY),
                         (_loaded(n_threads=2, n_gpu_layers=18, metadata=blocks), ROOMY),  # decodes on the GPU
                         (_loaded(n_threads=2, n_gpu_layers=-1), ROOMY),
                         (_loaded(n_threads=2, n_gpu_layers=9, metadata=blocks), SHARED)):  # half: CPU too
        # a server's Loaded counts only while the window uses that server (a late one is ignored)
        engine.remote = ("http://127.0.0.1:1", None, None) if loaded.chat_template_source == "server" else None
        engine._dispatch(loaded)
        assert engine.pacing == want and engine._batch.interval() == want.text_ms
    engine.remote = None
    assert len(seen) == 6


def test_generate_asks_the_engine_for_tokens_at_the_views_pace(qtbot, monkeypatch):
    from app.core.chat.pacing import SHARED

    engine = E.EngineQt()
    sent: list[object] = []
    monkeypatch.setattr(engine, "_send", lambda msg, report=True: sent.append(msg) or True)
    engine.set_pacing(SHARED)
    engine.generate(P.Generate(request_id="a", prompt="hi"))
    engine.generate(P.Generate(request_id="b", prompt="hi", stream_interval_ms=5))  # the caller's own choice
    assert [m.stream_interval_ms for m in sent] == [SHARED.text_ms, 5]
