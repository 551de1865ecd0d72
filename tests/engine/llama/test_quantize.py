"""Local quantization with llama.cpp's quantizer in a child process: sizes, loadable results, cancel."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import pytest

from app.core.config import paths
from app.core.gguf.info import inspect_gguf
from app.core.hub.downloads import provenance_path
from app.core.models import library
from app.engine.quantize_client import QuantizeCancelled, QuantizeError, QuantizeJob, quantize_model
from synth_gguf import write_synthetic_gguf


@pytest.fixture(scope="module")
def f32_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    # n_embd 512 so the 2-D weights dominate the file (norms and header are noise).
    return write_synthetic_gguf(tmp_path_factory.mktemp("q") / "src-f32.gguf", tensor_type="F32",
                                n_layers=4, n_embd=512, n_ff=1024, n_head=8, n_head_kv=4)


def _generate(path: Path) -> str:
    """Load in llama.cpp directly (tests may import it) and generate."""
    import llama_cpp

    llm = llama_cpp.Llama(model_path=str(path), n_ctx=64, n_threads=2, verbose=False, seed=1)
    out = llm.create_completion("Hello", max_tokens=6, temperature=0.0)
    llm.close()
    assert out["usage"]["completion_tokens"] >= 1  # type: ignore[index]
    return str(out["choices"][0]["text"])  # type: ignore[index]


@pytest.mark.parametrize("qtype,lo,hi", [
    # Whole-file ratio vs F32 follows bits per weight: Q8_0 stores 8.5 bits; Q4_K_M mixes 4.5-bit Q4_K
    # with 6.5625-bit Q6_K for some tensors (attn_v, ffn_down, output).
    ("Q8_0", 8.5 / 32 * 0.98, 8.5 / 32 * 1.03),
    ("Q4_K_M", 4.5 / 32, 6.5625 / 32),
])
def test_quantize_shrinks_and_loads(f32_model: Path, qtype: str, lo: float, hi: float) -> None:
    out = paths.models_dir() / f"tiny-{qtype}.gguf"
    events: list[str] = []
    result = quantize_model(f32_model, out, qtype, threads=2, on_event=lambda e, s: events.append(e["event"]))
    assert result == out and out.exists()
    assert not out.with_name(out.name + ".partial").exists()
    ratio = out.stat().st_size / f32_model.stat().st_size
    assert lo <= ratio <= hi, ratio
    assert inspect_gguf(out).file_type == qtype
    assert events[0] == "start" and "progress" in events and "verified" in events and events[-1] == "done"
    _generate(out)
    prov = json.loads(provenance_path(out).read_text())
    assert prov["source"] == "quantize" and prov["type"] == qtype and prov["from"] == str(f32_model)
    entry = library.find(out)
    assert entry is not None and entry.quant == qtype and entry.provenance["type"] == qtype


def test_refuses_already_quantized_input(tmp_path: Path) -> None:
    q = write_synthetic_gguf(tmp_path / "q8.gguf", tensor_type="Q8_0", n_layers=1)
    with pytest.raises(QuantizeError, match="already quantized"):
        quantize_model(q, tmp_path / "out.gguf", "Q4_0")
    assert not (tmp_path / "out.gguf").exists()


def test_cancel_terminates_and_deletes_partial(tmp_path: Path) -> None:
    # Big enough to take a few seconds on two cores.
    src = write_synthetic_gguf(tmp_path / "big-f32.gguf", tensor_type="F32", n_layers=6, n_embd=768,
                               n_ff=2048, n_head=8, n_head_kv=8)
    out = tmp_path / "big-q4km.gguf"
    started = threading.Event()

    def on_event(event: dict, state: object) -> None:
        if event["event"] == "progress" and event["bytes"] > 0:
            started.set()

    job = QuantizeJob(src, out, "Q4_K_M", threads=1, on_event=on_event)
    errors: list[BaseException] = []
    t = threading.Thread(target=lambda: _catch(job.run, errors))
    t.start()
    assert started.wait(60)
    job.cancel()
    t.join(30)
    assert errors and isinstance(errors[0], QuantizeCancelled)
    assert not out.exists() and not job.partial_path.exists()


def test_a_cancel_as_the_quantizer_finishes_leaves_nothing_written(f32_model: Path, tmp_path: Path) -> None:
    # The Cancel button can be pressed as the quantizer writes its last event: the job says "cancelled", so the
    # file it has just finished must go too (a busy machine showed the dialog "cancelled" beside the new file).
    out = tmp_path / "late-cancel.gguf"
    job: QuantizeJob

    def on_event(event: dict, state: object) -> None:
        if event["event"] == "done":
            job.cancel()

    job = QuantizeJob(f32_model, out, "Q8_0", threads=1, on_event=on_event)
    with pytest.raises(QuantizeCancelled):
        job.run()
    assert job.state.stage == "cancelled"
    assert not out.exists() and not job.partial_path.exists()


def _catch(fn, errors: list[BaseException]) -> None:  # type: ignore[no-untyped-def]
    try:
        fn()
    except BaseException as exc:  # noqa: BLE001
        errors.append(exc)


def test_every_offered_type_is_one_the_estimators_know() -> None:
    from app.core.gguf.quant_types import QUANTIZE_TARGETS, bits_per_weight

    assert all(bits_per_weight(t) for t in QUANTIZE_TARGETS)


def test_cli_quantize_registers_in_the_library(f32_model: Path) -> None:
    import os
    import subprocess
    import sys

    root = Path(__file__).resolve().parents[3]
    r = subprocess.run([sys.executable, "-m", "app.cli", "quantize", str(f32_model), "tiny-q4_0.gguf", "q4_0"],
                       cwd=root, env=os.environ.copy(), capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    out = Path(r.stdout.strip())
    assert out == paths.models_dir() / "tiny-q4_0.gguf" and "OK" in r.stderr
    entry = library.find(out)
    assert entry is not None and entry.quant == "Q4_0" and entry.provenance["source"] == "quantize"
