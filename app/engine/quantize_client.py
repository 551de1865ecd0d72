"""Run `python -m app.engine.llama.quantize` as a child process: progress events, cancel, library registration.

No llama_cpp here (the UI and CLI import this). Cancel terminates the child and deletes its partial output.
On success the result gets a provenance sidecar (source file, type, date) so the library shows where it came
from.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from app.core.files.writable import OutputPathError, ensure_writable_dir
from app.core.hub.downloads import write_provenance

PARTIAL_SUFFIX = ".partial"  # the child's temporary output name (app.engine.llama.quantize.PARTIAL_SUFFIX)


class QuantizeError(Exception):
    """Quantization failed or was refused; `str(err)` is a message for the user."""


class QuantizeCancelled(QuantizeError):
    pass


def quantize_command(in_path: Path, out_path: Path, qtype: str, threads: int = 0) -> list[str]:
    if getattr(sys, "frozen", False):
        return [sys.executable, "--quantize", str(in_path), str(out_path), qtype, "--threads", str(threads)]
    return [sys.executable, "-u", "-m", "app.engine.llama.quantize", str(in_path), str(out_path), qtype,
            "--threads", str(threads)]


@dataclass
class QuantizeState:
    fraction: float = 0.0
    bytes: int = 0
    predicted_bytes: int = 0
    tensor: int = 0
    tensors: int = 0
    stage: str = "starting"  # starting | quantizing | verifying | done | failed | cancelled
    message: str = ""
    events: list[dict[str, Any]] = field(default_factory=list)


class QuantizeJob:
    """One quantization. `run()` blocks; `cancel()` may be called from any thread."""

    def __init__(self, in_path: str | Path, out_path: str | Path, qtype: str, threads: int = 0,
                 on_event: Callable[[dict[str, Any], QuantizeState], None] | None = None):
        self.in_path = Path(in_path)
        self.out_path = Path(out_path)
        self.qtype = qtype.upper()
        self.threads = threads
        self.on_event = on_event
        self.state = QuantizeState()
        self._proc: subprocess.Popen[bytes] | None = None
        self._cancelled = threading.Event()
        self._stderr: list[str] = []

    @property
    def partial_path(self) -> Path:
        return self.out_path.with_name(self.out_path.name + PARTIAL_SUFFIX)

    def cancel(self) -> None:
        self._cancelled.set()
        proc = self._proc
        if proc is not None and proc.poll() is None:
            proc.terminate()

    def _preflight(self) -> None:
        from app.core.gguf.info import GGUFError, inspect_gguf

        if self.in_path.is_dir():
            raise QuantizeError(f"{self.in_path} is a directory; give the path of a .gguf file")
        if not self.in_path.is_file():
            raise QuantizeError(f"no such file: {self.in_path}")
        if self.out_path.is_dir():
            raise QuantizeError(f"{self.out_path} is a directory; give the name of the file to write")
        try:
            info = inspect_gguf(self.in_path)
        except GGUFError as exc:
            raise QuantizeError(f"{self.in_path.name} is not a usable GGUF model: {exc}") from exc
        # Worst case the output is as big as an F16 copy of the weights.
        try:
            ensure_writable_dir(self.out_path.parent, min(info.tensor_bytes, info.n_params * 2),
                                what="the quantized model")
        except OutputPathError as exc:
            raise QuantizeError(str(exc)) from None

    def run(self) -> Path:
        self._preflight()
        env = dict(os.environ)
        env.setdefault("PYTHONUNBUFFERED", "1")
        if self._cancelled.is_set():
            raise QuantizeCancelled("cancelled")
        existed = self.out_path.exists()
        self._proc = subprocess.Popen(
            quantize_command(self.in_path, self.out_path, self.qtype, self.threads),
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env,
            creationflags=getattr(subprocess, "CREATE_NO_WINDOW", 0),  # Windows: no console window
        )
        proc = self._proc
        reader = threading.Thread(target=self._drain_stderr, args=(proc,), daemon=True)
        reader.start()
        error: str | None = None
        assert proc.stdout is not None
        for raw in proc.stdout:
            try:
                event = json.loads(raw)
            except ValueError:
                continue  # not ours (a library printing to stdout)
            error = self._apply(event) or error
        proc.wait()
        reader.join(2)
        if self._cancelled.is_set():
            self.partial_path.unlink(missing_ok=True)
            if not existed:  # a cancel as the quantizer finished: "cancelled" must leave nothing written
                self.out_path.unlink(missing_ok=True)
            self.state.stage = "cancelled"
            self._notify({"event": "cancelled"})
            raise QuantizeCancelled("quantization cancelled; the partial output was deleted")
        if proc.returncode != 0 or not self.out_path.exists():
            self.partial_path.unlink(missing_ok=True)
            self.state.stage = "failed"
            tail = " | ".join(self._stderr[-3:])
            message = error or f"the quantizer exited with code {proc.returncode}: {tail}"
            self.state.message = message
            raise QuantizeError(message)
        done: dict[str, Any] = next((e for e in reversed(self.state.events) if e.get("event") == "done"), {})
        write_provenance(self.out_path, {
            "source": "quantize", "from": str(self.in_path.absolute()), "type": self.qtype,
            "date": datetime.now(UTC).isoformat(), "seconds": done.get("seconds"),
            "llama_cpp_version": done.get("llama_cpp_version"), "verified": True,
        })
        self.state.stage = "done"
        return self.out_path

    def _apply(self, event: dict[str, Any]) -> str | None:
        s = self.state
        s.events.append(event)
        kind = event.get("event")
        if kind == "start":
            s.predicted_bytes = int(event.get("predicted_bytes") or 0)
            s.stage = "quantizing"
        elif kind == "progress":
            s.fraction = float(event.get("fraction") or 0.0)
            s.bytes = int(event.get("bytes") or 0)
            s.tensor, s.tensors = int(event.get("tensor") or 0), int(event.get("tensors") or 0)
            if s.fraction >= 1.0:
                s.stage = "verifying"
        elif kind == "verified":
            s.stage = "verifying"
        elif kind == "done":
            s.fraction = 1.0
            s.bytes = int(event.get("bytes") or s.bytes)
        self._notify(event)
        return str(event.get("message")) if kind == "error" else None

    def _notify(self, event: dict[str, Any]) -> None:
        if self.on_event:
            self.on_event(event, self.state)

    def _drain_stderr(self, proc: subprocess.Popen[bytes]) -> None:
        assert proc.stderr is not None
        for raw in proc.stderr:
            line = raw.decode("utf-8", errors="replace").rstrip()
            if line:
                self._stderr = (self._stderr + [line])[-40:]


def quantize_model(in_path: str | Path, out_path: str | Path, qtype: str, threads: int = 0,
                   on_event: Callable[[dict[str, Any], QuantizeState], None] | None = None) -> Path:
    """Blocking convenience wrapper."""
    return QuantizeJob(in_path, out_path, qtype, threads, on_event).run()
