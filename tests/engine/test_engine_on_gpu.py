"""The engine with a GPU backend on a real Vulkan device (llvmpipe in CI): every layer offloaded by llama.cpp's
own account, greedy output identical to the CPU's, cancel between tokens, a killed engine restarted, and the
batch engine of `roofline serve` replying with its layers on the device."""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator
from pathlib import Path

import pytest

from app.engine import protocol as P
from app.engine.client import EngineClient, EngineError
from engine_helpers import collect
from vulkan_device import gpu_device

pytestmark = [pytest.mark.gpu, pytest.mark.model]


def greedy(n: int) -> P.Sampling:
    return P.Sampling(temperature=0.0, max_tokens=n, seed=1, ignore_eos=True)


def _engine(model: Path, n_gpu_layers: int) -> EngineClient:
    client = EngineClient()
    client.start()
    client.load(P.LoadConfig(model_path=str(model), n_ctx=512, n_threads=2, n_gpu_layers=n_gpu_layers))
    return client


@pytest.fixture(scope="module")
def on_gpu(default_model: Path) -> Iterator[EngineClient]:
    device = gpu_device()
    saved = os.environ.get("GGML_VK_VISIBLE_DEVICES")
    os.environ["GGML_VK_VISIBLE_DEVICES"] = "0"  # for the engine child started now; this process never loads it
    try:
        client = _engine(default_model, -1)
    finally:
        if saved is None:
            os.environ.pop("GGML_VK_VISIBLE_DEVICES", None)
        else:
            os.environ["GGML_VK_VISIBLE_DEVICES"] = saved
    client.device = device  # type: ignore[attr-defined]
    yield client
    client.close()


def test_every_layer_is_on_the_device_by_llama_cpps_account(on_gpu: EngineClient, default_model: Path) -> None:
    from app.core.gguf.info import inspect_gguf

    loaded = on_gpu.loaded
    assert loaded is not None and on_gpu.ready is not None and on_gpu.ready.gpu_offload
    name = on_gpu.device["name"]  # type: ignore[attr-defined]
    # The weights went to the device, not only said so: every block's bytes are in its buffer (the 262k
    # vocabulary's matrix stays in RAM on a device that refuses a matrix that big, as llvmpipe does).
    blocks = sum(inspect_gguf(default_model).layer_bytes) / 2**20
    assert loaded.buffers_mib.get(f"model:{name}", 0) == pytest.approx(blocks, rel=0.02)
    assert loaded.buffers_mib.get(f"KV:{name}", 0) > 0 and not loaded.buffers_mib.get("KV:CPU")
    assert any(d["name"] == name for d in on_gpu.ready.devices)


def test_greedy_output_is_the_cpus(on_gpu: EngineClient, default_model: Path) -> None:
    req = P.Generate(request_id="g1", prompt="The capital of France is", sampling=greedy(6))
    gpu_text = collect(on_gpu, req)[1].text
    cpu = _engine(default_model, 0)
    try:
        cpu_text = collect(cpu, P.Generate(request_id="c1", prompt="The capital of France is",
                                           sampling=greedy(6)))[1].text
    finally:
        cpu.close()
    assert gpu_text.strip() and gpu_text == cpu_text


def test_cancel_between_tokens_on_the_device(on_gpu: EngineClient) -> None:
    on_gpu.send(P.Generate(request_id="x1", prompt="Count: one, two,", sampling=greedy(200)))
    seen = 0
    while True:
        event = on_gpu.next_event(300)
        if getattr(event, "request_id", None) != "x1":
            continue  # a reply an earlier test of this shared engine left behind (one that timed out) is not this
        if isinstance(event, P.Token):
            seen += 1
            if seen == 2:
                on_gpu.send(P.Cancel("x1"))
        elif isinstance(event, P.Done):
            break
    assert event.finish_reason == "cancelled" and seen < 20


def test_a_killed_engine_is_restarted_and_offloads_again(default_model: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    gpu_device()
    monkeypatch.setenv("GGML_VK_VISIBLE_DEVICES", "0")
    client = _engine(default_model, -1)
    try:
        assert client.pid is not None
        os.kill(client.pid, signal.SIGKILL)
        with pytest.raises(EngineError):
            collect(client, P.Generate(request_id="k1", prompt="Hi", sampling=greedy(2)), timeout=60)
        client.close()
        client = _engine(default_model, -1)
        assert client.loaded is not None and any(k.startswith("model:Vulkan") for k in client.loaded.buffers_mib)
        reply = collect(client, P.Generate(request_id="k2", prompt="Hi", sampling=greedy(2)))[1]
        assert reply.finish_reason == "length"
    finally:
        client.close()


def test_the_dashboards_gpu_line_is_live_from_the_device(on_gpu: EngineClient) -> None:
    from app.ui.dashboard.memory import device_text

    on_gpu.send(P.GetStats())
    stats = on_gpu.wait_for((P.Stats,), 60)
    name = on_gpu.device["name"]  # type: ignore[attr-defined]
    assert [d["name"] for d in stats.devices] == [name]
    assert 0 < stats.devices[0]["memory_free"] <= stats.devices[0]["memory_total"]
    held = sum(mib for key, mib in on_gpu.loaded.buffers_mib.items() if key.endswith(":" + name))  # type: ignore[union-attr]
    text = device_text(on_gpu.loaded, stats)
    assert text is not None and f"{name} (" in text and f"this engine {held:.0f} MiB" in text


def test_the_batch_engine_of_serve_replies_with_its_layers_on_the_device(default_model: Path,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    import time

    from app.engine.batch.client import BatchEngineClient

    device = gpu_device()
    monkeypatch.setenv("GGML_VK_VISIBLE_DEVICES", "0")
    events: list[object] = []
    client = BatchEngineClient(2)
    try:
        loaded = client.start_loaded(P.LoadConfig(model_path=str(default_model), n_ctx=512, n_threads=2,
                                                  n_gpu_layers=-1), events.append)
        assert loaded.buffers_mib.get(f"model:{device['name']}", 0) > 0
        for rid in ("b1", "b2"):  # two sequences decoded together on the device
            client.send(P.Generate(request_id=rid, prompt="Once upon a time", sampling=greedy(4)))
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline and sum(isinstance(e, P.Done) for e in events) < 2:
            time.sleep(0.1)
        done = {e.request_id: e for e in events if isinstance(e, P.Done)}
        assert set(done) == {"b1", "b2"}, [e for e in events if isinstance(e, P.Error)]
        assert done["b1"].text == done["b2"].text and done["b1"].text.strip()  # same prompt, greedy
    finally:
        client.close()


def test_saved_kv_written_on_the_device_is_restored_by_a_new_engine(default_model: Path, tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """The chat's KV cache lives in device memory; the engine saves it to disk after the reply, and a new engine
    process (its device cache empty) restores it instead of prefilling — the same greedy reply as a prefill.
    Three blocks on the device, the rest in RAM: a restore has to fill both kinds of buffer, and llvmpipe runs
    each offloaded block many times slower than the CPU (three engines with every block took minutes)."""
    device = gpu_device()
    monkeypatch.setenv("GGML_VK_VISIBLE_DEVICES", "0")
    folder = tmp_path / "kv"
    sampling = greedy(12)  # with the question, past the 32 tokens below which a chat is not worth saving

    def load(client: EngineClient, store: Path | None) -> None:
        client.load(P.LoadConfig(model_path=str(default_model), n_ctx=512, n_threads=2, n_gpu_layers=4,
                                 warmup=False, kv_store_dir=str(store) if store else None, kv_store_budget_mib=64,
                                 kv_save_eager_mib=64))
        assert client.loaded is not None and client.loaded.buffers_mib.get(f"KV:{device['name']}", 0) > 0
        assert client.loaded.buffers_mib.get("KV:CPU", 0) > 0

    def turn(client: EngineClient, messages: list[dict[str, str]]) -> P.Done:
        req = P.Generate(request_id=client.new_request_id(), messages=messages, sampling=sampling,
                         conversation_id="gpu-chat")
        done = collect(client, req)[1]
        client.stats()  # answered once the engine has written the chat's state (right after Done)
        return done

    messages = [{"role": "user", "content": "Write a short poem about the sea and the wind, please."}]
    with EngineClient() as client:
        load(client, folder)
        first = turn(client, messages)
    assert len(list(folder.iterdir())) == 1
    messages += [{"role": "assistant", "content": first.text}, {"role": "user", "content": "Now one about mountains."}]
    with EngineClient() as client:  # a new process: nothing in device memory
        load(client, folder)
        restored = turn(client, messages)
    with EngineClient() as client:
        load(client, None)
        prefilled = turn(client, messages)
    m = restored.metrics
    assert m["kv_restored_tokens"] > 0 and m["prefill_tokens"] == m["prompt_tokens"] - m["kv_restored_tokens"]
    assert prefilled.metrics["kv_restored_tokens"] == 0
    assert restored.text == prefilled.text and restored.text.strip()
