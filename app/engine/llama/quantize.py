"""Quantize a GGUF model with llama.cpp's own quantizer, in its own process.

    python -m app.engine.llama.quantize IN OUT TYPE [--threads N]

Prints one JSON object per line on stdout: `start` (with the predicted output size), `progress` (fraction,
bytes written, tensor i of n), `verified` (the result loaded and generated a few tokens), `done`, or `error`
(with a message for the user). The output is written to `OUT.partial` and renamed to OUT only after the
quantizer succeeded *and* the result loaded: a cancelled, crashed or broken run never leaves a file that looks
finished. Cancelling is terminating this process (see `app.engine.quantize_client`).

Only this process and the engine worker import llama_cpp; the app talks to it through `quantize_client`.
"""

from __future__ import annotations

import argparse
import ctypes
import json
import os
import re
import sys
import threading
import time
from pathlib import Path
from typing import Any

from app.core.gguf.quant_types import QUANTIZE_TARGETS

SOURCE_TYPES = {"F32", "F16", "BF16"}
PARTIAL_SUFFIX = ".partial"
_TENSOR_LINE = re.compile(r"\[\s*(\d+)\s*/\s*(\d+)\s*\]")


def emit(event: str, **fields: Any) -> None:
    sys.stdout.write(json.dumps({"event": event, **fields}) + "\n")
    sys.stdout.flush()


def predicted_size(in_path: Path, qtype: str) -> int:
    """Output bytes expected: 2-D weights at the target's bits per weight, the rest unchanged.

    Mixes (Q4_K_M...) keep some tensors wider; app.core.gguf.quant_types' whole-file bits per weight include that.
    """
    from app.core.gguf.info import inspect_gguf
    from app.core.gguf.quant_types import bits_per_weight

    info = inspect_gguf(in_path)
    bpw = bits_per_weight(qtype) or 8.0
    total = info.data_offset
    for t in info.tensors:
        total += int(t.n_elements * bpw / 8) if len(t.shape) >= 2 and t.shape[1] > 1 else t.n_bytes
    return total


def check_source(in_path: Path) -> str:
    from app.core.gguf.info import GGUFError, inspect_gguf

    try:
        info = inspect_gguf(in_path)
    except GGUFError as exc:
        raise SystemExit(f"{in_path.name} is not a usable GGUF model: {exc}") from None
    if info.file_type not in SOURCE_TYPES:
        raise SystemExit(f"{in_path.name} is already quantized ({info.file_type}); quantize from an F32, F16 "
                         "or BF16 file (requantizing compounds the error)")
    return info.file_type


class _Log:
    """Capture llama.cpp's log: the quantizer reports each tensor as `[ i/ n] name ...`."""

    def __init__(self) -> None:
        import llama_cpp

        self.tensor = (0, 0)
        self.tail: list[str] = []
        self._partial = ""
        self.callback = llama_cpp.llama_log_callback(self._on_log)  # keep a reference
        llama_cpp.llama_log_set(self.callback, ctypes.c_void_p(0))

    def _on_log(self, level: int, text: bytes, user_data: ctypes.c_void_p) -> None:
        self._partial += text.decode("utf-8", errors="replace")
        while "\n" in self._partial:
            line, self._partial = self._partial.split("\n", 1)
            m = _TENSOR_LINE.match(line.strip())
            if m:
                self.tensor = (int(m.group(1)), int(m.group(2)))
            self.tail = (self.tail + [line])[-20:]


def quantize(in_path: Path, out_path: Path, qtype: str, threads: int) -> None:
    import llama_cpp

    ftype = getattr(llama_cpp, f"LLAMA_FTYPE_MOSTLY_{qtype}", None)
    if ftype is None:
        raise SystemExit(f"llama.cpp {llama_cpp.__version__} has no quantization type {qtype}")
    source_type = check_source(in_path)
    predicted = predicted_size(in_path, qtype)
    tmp = out_path.with_name(out_path.name + PARTIAL_SUFFIX)
    tmp.unlink(missing_ok=True)
    emit("start", input=str(in_path), output=str(out_path), type=qtype, source_type=source_type,
         predicted_bytes=predicted, pid=os.getpid())
    log = _Log()
    params = llama_cpp.llama_model_quantize_default_params()
    params.ftype = ftype
    params.nthread = threads
    result: dict[str, int] = {}

    def work() -> None:
        result["rc"] = llama_cpp.llama_model_quantize(str(in_path).encode(), str(tmp).encode(),
                                                     ctypes.byref(params))

    t0 = time.monotonic()
    worker = threading.Thread(target=work, daemon=True)
    worker.start()
    while worker.is_alive():
        worker.join(0.25)
        written = tmp.stat().st_size if tmp.exists() else 0
        i, n = log.tensor
        # Bytes written track the work best (big tensors take long); the tensor count is a floor.
        fraction = min(0.99, max(written / predicted if predicted else 0.0, (i - 1) / n if n else 0.0))
        emit("progress", fraction=round(fraction, 4), bytes=written, tensor=i, tensors=n)
    if result.get("rc") != 0:
        tmp.unlink(missing_ok=True)
        detail = " | ".join(line for line in log.tail[-3:] if line.strip())
        raise SystemExit(f"llama.cpp's quantizer failed (code {result.get('rc')}): {detail}")
    seconds = time.monotonic() - t0
    emit("progress", fraction=1.0, bytes=tmp.stat().st_size, tensor=log.tensor[1], tensors=log.tensor[1])
    verify(tmp)
    os.replace(tmp, out_path)
    emit("done", output=str(out_path), bytes=out_path.stat().st_size, seconds=round(seconds, 3),
         type=qtype, llama_cpp_version=llama_cpp.__version__)


def verify(path: Path) -> None:
    """Load the result and generate a few tokens: a file that does not run is not a result."""
    import llama_cpp

    from app.engine.llama.worker.llama_templates import templates_left_to_the_app

    t0 = time.monotonic()
    try:
        with templates_left_to_the_app():  # the source's chat templates, carried over: not compiled to verify
            llm = llama_cpp.Llama(model_path=str(path), n_ctx=64, n_batch=32, n_threads=2, verbose=False, seed=1)
        out = llm.create_completion("The", max_tokens=4, temperature=0.0)
        n_tokens = int(out["usage"]["completion_tokens"])  # type: ignore[index]
        llm.close()
    except Exception as exc:  # noqa: BLE001 - any failure to load/run means the file is not usable
        path.unlink(missing_ok=True)
        raise SystemExit(f"the quantized file did not load: {exc}") from None
    if n_tokens < 1:
        path.unlink(missing_ok=True)
        raise SystemExit("the quantized model loaded but generated nothing")
    emit("verified", load_and_generate_ms=round((time.monotonic() - t0) * 1000, 1), tokens=n_tokens)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m app.engine.llama.quantize")
    parser.add_argument("input")
    parser.add_argument("output")
    parser.add_argument("type", type=str.upper, choices=QUANTIZE_TARGETS, metavar="TYPE")
    parser.add_argument("--threads", type=int, default=0, help="0: all cores")
    args = parser.parse_args(argv)
    in_path, out_path = Path(args.input), Path(args.output)
    try:
        if not in_path.is_file():
            raise SystemExit(f"no such file: {in_path}")
        if out_path.exists():
            raise SystemExit(f"{out_path} exists; choose another name or remove it first")
        if in_path.resolve() == out_path.resolve():
            raise SystemExit("input and output are the same file")
        out_path.parent.mkdir(parents=True, exist_ok=True)
        from app.engine.llama.backends import load_backends

        load_backends()  # a portable build's CPU backend is a module ggml would not find by itself
        quantize(in_path, out_path, args.type, args.threads)
    except SystemExit as exc:
        if isinstance(exc.code, str):
            emit("error", message=exc.code)
            return 1
        raise
    return 0


if __name__ == "__main__":
    sys.exit(main())
