"""Run the packaged llama.cpp on older x86-64 CPUs, emulated with qemu-user, and say which CPU variant each used.

For each `-cpu` model (default: Nehalem = SSE4.2, SandyBridge = AVX, Haswell = AVX2, Skylake-Server = AVX-512) one
process runs under `qemu-x86_64 -cpu MODEL`: the frozen app's engine role (`roofline --engine-worker`), fed a load
and a generate on stdin. The engine itself is the emulated process: qemu-user does not follow a child process into
emulation (an exec'd child would run natively), so nothing here may spawn one, and the frozen app's launcher is
kept from re-executing itself (see `frozen_single_process_env`). The engine's Ready event names the
CPU backend library ggml chose under the emulated CPUID, which is the proof that the emulated CPU is what ran; with
`--strace` qemu's syscall log is also searched for an execve that would have escaped the emulator.

Prints one line per CPU; exit 0 only when every CPU loaded the model and generated the tokens. Standard library
only, so the system Python can run it against a bundle: `scripts/portable_check [--app dist/roofline/roofline]`.
`--python PY` runs the engine from a source checkout with that interpreter instead (e.g. the development .venv,
whose native build is expected to die with SIGILL on older CPUs).
"""

from __future__ import annotations

import argparse
import json
import os
import queue
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
CPUS = ("Nehalem", "SandyBridge", "Haswell", "Skylake-Server")
# The variant ggml should pick for each model when the emulator offers every feature the model has.
EXPECTED = {"Nehalem": "sse42", "SandyBridge": "sandybridge", "Haswell": "haswell", "Skylake-Server": "skylakex"}
PROMPT = "The capital of France is"
SIMD_PREFIXES = ("avx", "amx", "fma", "f16c", "bmi", "sse", "vpclmul", "vaes", "gfni")


@dataclass
class CpuResult:
    cpu: str
    ok: bool = False
    variant: str = "-"
    tokens: int = 0
    text: str = ""
    load_s: float = 0.0
    gen_s: float = 0.0
    exit: str = ""
    problem: str = ""
    execve: int | None = None  # with --strace: execve calls qemu saw (0: nothing escaped the emulator)
    dropped: list[str] = field(default_factory=list)  # CPU features qemu said it cannot emulate

    def line(self) -> str:
        status = "ok  " if self.ok else "FAIL"
        parts = [f"{self.cpu:<15} {status} variant {self.variant}"]
        if self.ok:
            parts.append(f"{self.tokens} tokens {self.text.strip()[:30]!r}, load {self.load_s:.1f} s, "
                         f"generate {self.gen_s:.1f} s")
        else:
            parts.append(self.problem or self.exit)
        expected = EXPECTED.get(self.cpu)
        if self.ok and expected and not self.variant.startswith(expected):
            simd = [f for f in self.dropped if f.startswith(SIMD_PREFIXES)]
            parts.append(f"(expected {expected}"
                         + (f"; qemu cannot emulate {', '.join(simd[:4])}" if simd else "") + ")")
        if self.execve is not None:
            parts.append(f"execve under qemu: {self.execve}")
        return "  ".join(parts)


def describe_exit(code: int | None) -> str:
    """`-4` / `132` → "killed by SIGILL" (qemu-user re-raises the guest's fatal signal on itself)."""
    if code is None:
        return "still running"
    sig = -code if code < 0 else code - 128 if code > 128 else 0
    if sig:
        try:
            return f"killed by {signal.Signals(sig).name}"
        except ValueError:
            return f"killed by signal {sig}"
    return f"exit code {code}"


def dropped_features(stderr_text: str) -> list[str]:
    """Features qemu announced it does not emulate ("TCG doesn't support requested feature: CPUID.07H:EBX.avx512f")."""
    return sorted(set(re.findall(r"TCG doesn't support requested feature: \S*\.([\w-]+)", stderr_text)))


def count_execve(strace_text: str) -> int:
    """execve calls in qemu's -strace log (the emulated program starting a program qemu would not emulate)."""
    return len(re.findall(r"\bexecve\(", strace_text))


class _Lines:
    """stdout of the engine as JSON events, read on a thread so every wait has a deadline."""

    def __init__(self, stream: Any) -> None:
        self.q: queue.Queue[dict[str, Any] | None] = queue.Queue()
        threading.Thread(target=self._read, args=(stream,), daemon=True).start()

    def _read(self, stream: Any) -> None:
        for raw in stream:
            try:
                event = json.loads(raw)
            except ValueError:
                continue
            if isinstance(event, dict):
                self.q.put(event)
        self.q.put(None)

    def wait(self, kinds: set[str], deadline: float) -> dict[str, Any]:
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError(f"no {'/'.join(sorted(kinds))} event in time")
            try:
                event = self.q.get(timeout=left)
            except queue.Empty:
                continue
            if event is None:
                raise EOFError("the engine's output ended")
            if event.get("type") == "error":
                raise RuntimeError(f"engine error: {event.get('message', '')[:200]}")
            if event.get("type") in kinds:
                return event


def run_one(qemu: str, cpu: str, command: list[str], model: Path, tokens: int, timeout: float, strace: bool,
            env: dict[str, str], cwd: Path) -> CpuResult:
    result = CpuResult(cpu)
    with tempfile.TemporaryDirectory(prefix="roofline-portable-") as home:
        err_path = Path(home) / "stderr.log"
        argv = [qemu, "-cpu", cpu] + (["-strace"] if strace else []) + command
        with open(err_path, "wb") as err:
            proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=err, cwd=cwd,
                                    env={**env, "ROOFLINE_HOME": home})
        assert proc.stdin is not None and proc.stdout is not None
        lines = _Lines(proc.stdout)
        deadline = time.monotonic() + timeout

        def send(msg: dict[str, Any]) -> None:
            assert proc.stdin is not None
            proc.stdin.write((json.dumps(msg) + "\n").encode())
            proc.stdin.flush()

        try:
            ready = lines.wait({"ready"}, deadline)
            result.variant = ready.get("cpu_backend") or "unknown (an engine without cpu_backend)"
            t0 = time.monotonic()
            send({"type": "load", "config": {"model_path": str(model), "n_ctx": 256, "n_threads": 2,
                                             "n_threads_batch": 2, "n_batch": 64, "n_ubatch": 64}})
            lines.wait({"loaded"}, deadline)
            t1 = time.monotonic()
            send({"type": "generate", "request_id": "portable", "prompt": PROMPT,
                  "sampling": {"temperature": 0.0, "max_tokens": tokens, "seed": 1, "ignore_eos": True}})
            done = lines.wait({"done"}, deadline)
            result.gen_s, result.load_s = time.monotonic() - t1, t1 - t0
            result.text = str(done.get("text", ""))
            result.tokens = int(done.get("metrics", {}).get("generated_tokens", 0))
            result.ok = result.tokens == tokens
            if not result.ok:
                result.problem = f"asked for {tokens} tokens, got {result.tokens}"
            send({"type": "shutdown"})
        except (TimeoutError, EOFError, RuntimeError, OSError) as exc:
            result.ok = False
            result.problem = str(exc)
        try:
            code = proc.wait(30 if result.ok else 5)
        except subprocess.TimeoutExpired:
            proc.kill()
            code = proc.wait(10)
        result.exit = describe_exit(code)
        if not result.ok and code not in (0, None):
            result.problem = f"{result.exit} ({result.problem})"
        text = err_path.read_text(errors="replace")
        result.dropped = dropped_features(text)
        if strace:
            result.execve = count_execve(text)
            if result.execve:
                result.ok = False
                result.problem = "the engine started another program, which qemu-user would run natively"
        elif not result.ok:
            tail = [ln for ln in text.splitlines() if ln.strip()][-3:]
            if tail:
                result.problem += " | " + " / ".join(tail)[-300:]
    return result


def frozen_single_process_env(app: Path) -> dict[str, str]:
    """Environment that keeps a PyInstaller one-folder app in the process qemu started.

    On Linux the PyInstaller 6 bootloader of a one-folder app sets LD_LIBRARY_PATH and then exec()s itself so the
    loader sees it; under qemu-user that exec leaves the emulator and the app runs natively. With the variables
    the restarted image would find (its archive, the "restarted launcher" process level -1, the library path) the
    bootloader takes itself for the restarted process and runs Python directly.
    """
    app = app.resolve()
    internal = app.parent / "_internal"
    return {"_PYI_ARCHIVE_FILE": str(app), "_PYI_PARENT_PROCESS_LEVEL": "-1",
            "LD_LIBRARY_PATH": os.pathsep.join(p for p in (str(internal), os.environ.get("LD_LIBRARY_PATH")) if p)}


def bundled_model(app: Path) -> Path | None:
    models = sorted((app.parent / "_internal" / "models").glob("*.gguf"))
    return models[0] if models else None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="scripts/portable_check", description=__doc__.split("\n\n")[0])
    parser.add_argument("--app", default=str(ROOT / "dist" / "roofline" / "roofline"),
                        help="the frozen app (default: dist/roofline/roofline from scripts/package)")
    parser.add_argument("--python", help="run the engine from this checkout with this Python instead of --app")
    parser.add_argument("--cpus", default=",".join(CPUS), help=f"qemu -cpu models (default {','.join(CPUS)})")
    parser.add_argument("--model", help="GGUF to load (default: the bundled model, else ROOFLINE_DEFAULT_MODEL)")
    parser.add_argument("--tokens", type=int, default=4)
    parser.add_argument("--timeout", type=float, default=900.0, help="seconds per CPU (emulation is slow)")
    parser.add_argument("--strace", action="store_true", help="also log syscalls and fail on any execve")
    parser.add_argument("--qemu", default="qemu-x86_64")
    args = parser.parse_args(argv)

    qemu = shutil.which(args.qemu)
    if qemu is None:
        print(f"portable_check: {args.qemu} not found (Debian/Ubuntu: sudo apt-get install qemu-user)")
        return 2
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV", "ROOFLINE_DEFAULT_MODEL")}
    env["PYTHONUNBUFFERED"] = "1"
    if args.python:
        command = [args.python, "-u", "-m", "app.engine.llama.worker"]
        env["PYTHONPATH"] = str(ROOT)
        what = f"{args.python} -m app.engine.llama.worker (source checkout)"
    else:
        app = Path(args.app)
        if not app.is_file():
            print(f"portable_check: no frozen app at {app}: run scripts/package first")
            return 2
        command = [str(app), "--engine-worker"]
        what = f"{app} --engine-worker"
        env.update(frozen_single_process_env(app))
    model = Path(args.model) if args.model else (None if args.python else bundled_model(Path(args.app)))
    if model is None and os.environ.get("ROOFLINE_DEFAULT_MODEL"):
        model = Path(os.environ["ROOFLINE_DEFAULT_MODEL"])
    if model is None or not model.is_file():
        print(f"portable_check: no model file ({model}); pass --model FILE.gguf")
        return 2
    out = subprocess.run([qemu, "--version"], capture_output=True, text=True,
                         check=False).stdout.splitlines()
    print(f"portable_check: {out[0] if out else qemu}; engine {what}; model {model.name}", flush=True)
    results = []
    for cpu in [c.strip() for c in args.cpus.split(",") if c.strip()]:
        r = run_one(qemu, cpu, command, model, args.tokens, args.timeout, args.strace, env, ROOT)
        results.append(r)
        print(r.line(), flush=True)
    passed = sum(r.ok for r in results)
    print(f"portable_check: {passed}/{len(results)} CPUs loaded the model and generated {args.tokens} tokens")
    return 0 if passed == len(results) else 1


if __name__ == "__main__":
    sys.exit(main())
