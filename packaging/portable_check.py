"""Run the packaged llama.cpp on older x86-64 CPUs (emulated with qemu-user) and with and without a Vulkan driver.

CPU variants. For each `-cpu` model (default: Nehalem = SSE4.2, SandyBridge = AVX, Haswell = AVX2, Skylake-Server =
AVX-512) one process runs under `qemu-x86_64 -cpu MODEL`: the frozen app's engine role (`roofline --engine-worker`),
fed a load and a generate on stdin. The engine itself is the emulated process: qemu-user does not follow a child
process into emulation (an exec'd child would run natively), so nothing here may spawn one, and the frozen app's
launcher is kept from re-executing itself (see `frozen_single_process_env`). The engine's Ready event names the
CPU backend library ggml chose under the emulated CPUID, which is the proof that the emulated CPU is what ran; with
`--strace` qemu's syscall log is also searched for an execve that would have escaped the emulator.

Vulkan (when the bundle carries the loadable backend `libggml-vulkan.so`; natively, no qemu), three cases, each a
load with every layer asked on the GPU (`n_gpu_layers` -1, what the app's offload setting sends) and a generate:
- "no Vulkan loader": libvulkan.so.1 cannot be loaded (a stand-in that the dynamic loader rejects comes first on
  LD_LIBRARY_PATH), as on a machine without the Vulkan loader package: ggml must skip the module and the model
  must load and generate on the CPU;
- "no Vulkan driver": the loader is there but finds no driver (VK_DRIVER_FILES / VK_ICD_FILENAMES name an empty
  folder): the same, on the CPU;
- "Vulkan driver": the system's drivers, GGML_VK_VISIBLE_DEVICES as set, else 0 (llama.cpp leaves CPU-type
  devices such as Mesa's llvmpipe out unless named): every layer must be assigned to a GPU and the model's weights
  must be in a Vulkan buffer, by llama.cpp's own load log ("layer N assigned to device Vulkan0", "Vulkan0 model
  buffer size = … MiB"), which the engine's Loaded event reports (gpu_layers_placed/total, buffers_mib).

Prints one line per case; exit 0 only when every case loaded the model and generated the tokens, 2 when a case
could not run (no qemu-user) and the others passed. Standard library only, so the system Python can run it against
a bundle: `scripts/portable_check [--app dist/roofline/roofline]`. `--python PY` runs the engine from a source
checkout with that interpreter instead (e.g. the development .venv, whose native build is expected to die with
SIGILL on older CPUs).
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


@dataclass
class Session:
    """What one engine process said: its Ready/Loaded/Done events, how it ended, its stderr."""

    ready: dict[str, Any] = field(default_factory=dict)
    loaded: dict[str, Any] = field(default_factory=dict)
    done: dict[str, Any] = field(default_factory=dict)
    load_s: float = 0.0
    gen_s: float = 0.0
    code: int | None = None
    problem: str = ""  # why the engine did not answer the load and the generate ("" when it did)
    stderr: str = ""

    @property
    def tokens(self) -> int:
        return int(self.done.get("metrics", {}).get("generated_tokens", 0))


def run_engine(argv: list[str], model: Path, tokens: int, timeout: float, env: dict[str, str], cwd: Path,
               load: dict[str, Any] | None = None) -> Session:
    """Start the engine (`argv`), load `model` (plus the `load` settings), generate `tokens` greedily, shut down."""
    out = Session()
    with tempfile.TemporaryDirectory(prefix="roofline-portable-") as home:
        err_path = Path(home) / "stderr.log"
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
            out.ready = lines.wait({"ready"}, deadline)
            t0 = time.monotonic()
            send({"type": "load", "config": {"model_path": str(model), "n_ctx": 256, "n_threads": 2,
                                             "n_threads_batch": 2, "n_batch": 64, "n_ubatch": 64, **(load or {})}})
            out.loaded = lines.wait({"loaded"}, deadline)
            t1 = time.monotonic()
            send({"type": "generate", "request_id": "portable", "prompt": PROMPT,
                  "sampling": {"temperature": 0.0, "max_tokens": tokens, "seed": 1, "ignore_eos": True}})
            out.done = lines.wait({"done"}, deadline)
            out.gen_s, out.load_s = time.monotonic() - t1, t1 - t0
            send({"type": "shutdown"})
        except (TimeoutError, EOFError, RuntimeError, OSError) as exc:
            out.problem = str(exc)
        try:
            out.code = proc.wait(30 if not out.problem else 5)
        except subprocess.TimeoutExpired:
            proc.kill()
            out.code = proc.wait(10)
        out.stderr = err_path.read_text(errors="replace")
    return out


def stderr_tail(text: str, n: int = 3) -> str:
    tail = [ln for ln in text.splitlines() if ln.strip()][-n:]
    return " / ".join(tail)[-300:]


def run_one(qemu: str, cpu: str, command: list[str], model: Path, tokens: int, timeout: float, strace: bool,
            env: dict[str, str], cwd: Path) -> CpuResult:
    result = CpuResult(cpu)
    argv = [qemu, "-cpu", cpu] + (["-strace"] if strace else []) + command
    s = run_engine(argv, model, tokens, timeout, env, cwd)
    if s.ready:
        result.variant = s.ready.get("cpu_backend") or "unknown (an engine without cpu_backend)"
    result.problem = s.problem
    if not s.problem:
        result.gen_s, result.load_s = s.gen_s, s.load_s
        result.text = str(s.done.get("text", ""))
        result.tokens = s.tokens
        result.ok = result.tokens == tokens
        if not result.ok:
            result.problem = f"asked for {tokens} tokens, got {result.tokens}"
    result.exit = describe_exit(s.code)
    if not result.ok and s.code not in (0, None):
        result.problem = f"{result.exit} ({result.problem})"
    result.dropped = dropped_features(s.stderr)
    if strace:
        result.execve = count_execve(s.stderr)
        if result.execve:
            result.ok = False
            result.problem = "the engine started another program, which qemu-user would run natively"
    elif not result.ok and stderr_tail(s.stderr):
        result.problem += " | " + stderr_tail(s.stderr)
    return result


# ------------------------------------------------------------------------------------------------ Vulkan

VULKAN_CASES = ("no Vulkan loader", "no Vulkan driver", "Vulkan driver")


def model_buffers(loaded: dict[str, Any]) -> dict[str, float]:
    """MiB of model weights per buffer type ("Vulkan0", "CPU_Mapped", …), as llama.cpp's load log states them
    ("Vulkan0 model buffer size = 160.22 MiB"): the engine's Loaded event carries those lines as buffers_mib."""
    return {k.split(":", 1)[1]: float(v) for k, v in loaded.get("buffers_mib", {}).items() if k.startswith("model:")}


@dataclass
class GpuResult:
    case: str
    ok: bool = False
    placement: str = "-"  # "19/19 layers on Vulkan0" or "all 19 layers on the CPU"
    detail: str = ""  # the device or the CPU variant, the model buffers
    tokens: int = 0
    text: str = ""
    load_s: float = 0.0
    gen_s: float = 0.0
    problem: str = ""

    def line(self) -> str:
        status = "ok  " if self.ok else "FAIL"
        parts = [f"{self.case:<16} {status} {self.placement}"]
        if self.detail:
            parts.append(self.detail)
        if self.ok:
            parts.append(f"{self.tokens} tokens {self.text.strip()[:30]!r}, load {self.load_s:.1f} s, "
                         f"generate {self.gen_s:.1f} s")
        else:
            parts.append(self.problem)
        return "  ".join(parts)


def judge_vulkan(case: str, s: Session, tokens: int) -> GpuResult:
    """Pass or fail one Vulkan case from what the engine said. Where the layers went is llama.cpp's own word: the
    Loaded event's gpu_layers_placed/total count its "layer N assigned to device …" lines, buffers_mib its
    "… model buffer size" lines (the engine keeps every llama.cpp log line)."""
    r = GpuResult(case)
    vulkan_devices = [d for d in s.ready.get("devices", []) if str(d.get("backend", "")) == "Vulkan"]
    backends = " ".join(s.ready.get("backends", [])) or "none"
    buffers = model_buffers(s.loaded)
    on_vulkan = {k: v for k, v in buffers.items() if k.startswith("Vulkan")}
    placed, total = s.loaded.get("gpu_layers_placed"), s.loaded.get("gpu_layers_total")
    if s.loaded and total:
        r.placement = (f"{placed}/{total} layers on {','.join(on_vulkan) or 'a GPU'}" if placed
                       else f"all {total} layers on the CPU")
    if case == "Vulkan driver":
        r.detail = "; ".join([f"{d.get('name')} = {d.get('description')}" for d in vulkan_devices]
                             + [f"{k} model buffer {v:g} MiB" for k, v in on_vulkan.items()])
    else:
        r.detail = f"CPU variant {str(s.ready.get('cpu_backend') or '?').split()[0]}; ggml backends {backends}"
    r.text, r.tokens, r.gen_s, r.load_s = str(s.done.get("text", "")), s.tokens, s.gen_s, s.load_s
    problems = []
    if s.problem:
        problems.append(f"{describe_exit(s.code)} ({s.problem})" if s.code not in (0, None) else s.problem)
    elif r.tokens != tokens:
        problems.append(f"asked for {tokens} tokens, got {r.tokens}")
    if s.loaded and not total:
        problems.append("llama.cpp's load log named no layer placement")
    if case == "Vulkan driver":
        if s.ready and "Vulkan" not in s.ready.get("backends", []):
            problems.append(f"the Vulkan backend did not load (ggml backends {backends})")
        elif s.ready and not vulkan_devices:
            problems.append("the Vulkan backend sees no device (GGML_VK_VISIBLE_DEVICES?)")
        if s.loaded and total and placed != total:
            problems.append(f"only {placed} of {total} layers were assigned to a GPU")
        if s.loaded and not any(v > 0 for v in on_vulkan.values()):
            problems.append("no model buffer on a Vulkan device")
    else:
        if case == "no Vulkan loader" and "Vulkan" in s.ready.get("backends", []):
            problems.append("the Vulkan backend loaded: libvulkan was not hidden (does the bundle carry its own?)")
        if vulkan_devices:
            problems.append("a Vulkan device is visible: the driver was not hidden")
        if placed or on_vulkan:
            problems.append(f"{placed} layers went to a GPU ({', '.join(on_vulkan) or '?'})")
    if problems and not s.problem and stderr_tail(s.stderr):
        problems.append(stderr_tail(s.stderr))
    r.problem = "; ".join(problems)
    r.ok = not problems
    return r


def vulkan_env(case: str, env: dict[str, str], scratch: Path) -> dict[str, str]:
    """The environment of one Vulkan case: the same GGML_VK_VISIBLE_DEVICES for all three, so the only difference
    between them is the loader or the driver taken away."""
    out = {**env, "GGML_VK_VISIBLE_DEVICES": env.get("GGML_VK_VISIBLE_DEVICES", "0")}
    if case == "no Vulkan loader":
        # A libvulkan.so.1 the dynamic loader rejects ("file too short") ahead of the system's: dlopen of
        # libggml-vulkan.so fails exactly as where no Vulkan loader is installed.
        stand_in = scratch / "no-libvulkan"
        stand_in.mkdir(exist_ok=True)
        (stand_in / "libvulkan.so.1").write_bytes(b"")
        out["LD_LIBRARY_PATH"] = os.pathsep.join(p for p in (str(stand_in), env.get("LD_LIBRARY_PATH")) if p)
    elif case == "no Vulkan driver":
        empty = scratch / "no-vulkan-drivers"
        empty.mkdir(exist_ok=True)
        for name in ("VK_ADD_DRIVER_FILES", "VK_ADD_ICD_FILENAMES"):
            out.pop(name, None)
        out["VK_DRIVER_FILES"] = out["VK_ICD_FILENAMES"] = str(empty)  # the loader's old and new names
    return out


def has_vulkan_module(lib_dir: Path | None) -> bool:
    return lib_dir is not None and any(lib_dir.glob("libggml-vulkan.*"))


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


def python_lib_dir(python: str, env: dict[str, str]) -> Path | None:
    """llama_cpp's library folder as `python` imports it (where its backend modules are)."""
    got = subprocess.run([python, "-c", "import llama_cpp.llama_cpp as l; print(l._base_path)"], capture_output=True,
                         text=True, env=env, cwd=ROOT, check=False, timeout=120)
    return Path(got.stdout.strip()) if got.returncode == 0 and got.stdout.strip() else None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="scripts/portable_check", description=__doc__.split("\n\n")[0])
    parser.add_argument("--app", default=str(ROOT / "dist" / "roofline" / "roofline"),
                        help="the frozen app (default: dist/roofline/roofline from scripts/package)")
    parser.add_argument("--python", help="run the engine from this checkout with this Python instead of --app")
    parser.add_argument("--cpus", default=",".join(CPUS),
                        help=f"qemu -cpu models (default {','.join(CPUS)}; 'none': no emulated CPU)")
    parser.add_argument("--vulkan", choices=("auto", "on", "off"), default="auto",
                        help="the Vulkan cases: auto = when the build carries libggml-vulkan.so (default)")
    parser.add_argument("--model", help="GGUF to load (default: the bundled model, else ROOFLINE_DEFAULT_MODEL)")
    parser.add_argument("--tokens", type=int, default=4)
    parser.add_argument("--timeout", type=float, default=900.0, help="seconds per case (emulation is slow)")
    parser.add_argument("--strace", action="store_true", help="also log syscalls and fail on any execve")
    parser.add_argument("--qemu", default="qemu-x86_64")
    args = parser.parse_args(argv)

    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV", "ROOFLINE_DEFAULT_MODEL")}
    env["PYTHONUNBUFFERED"] = "1"
    emulated_env = dict(env)
    if args.python:
        command = [args.python, "-u", "-m", "app.engine.llama.worker"]
        env["PYTHONPATH"] = emulated_env["PYTHONPATH"] = str(ROOT)
        what = f"{args.python} -m app.engine.llama.worker (source checkout)"
        lib_dir = python_lib_dir(args.python, env)
    else:
        app = Path(args.app)
        if not app.is_file():
            print(f"portable_check: no frozen app at {app}: run scripts/package first")
            return 2
        command = [str(app), "--engine-worker"]
        what = f"{app} --engine-worker"
        emulated_env.update(frozen_single_process_env(app))  # natively the launcher may re-execute itself
        lib_dir = app.parent / "_internal" / "llama_cpp" / "lib"
    model = Path(args.model) if args.model else (None if args.python else bundled_model(Path(args.app)))
    if model is None and os.environ.get("ROOFLINE_DEFAULT_MODEL"):
        model = Path(os.environ["ROOFLINE_DEFAULT_MODEL"])
    if model is None or not model.is_file():
        print(f"portable_check: no model file ({model}); pass --model FILE.gguf")
        return 2
    cpus = [c.strip() for c in args.cpus.split(",") if c.strip() and c.strip() != "none"]
    qemu = shutil.which(args.qemu)
    qemu_says = "no qemu-user"
    if qemu:
        out = subprocess.run([qemu, "--version"], capture_output=True, text=True, check=False).stdout.splitlines()
        qemu_says = out[0] if out else qemu
    print(f"portable_check: {qemu_says}; engine {what}; model {model.name}", flush=True)
    results: list[CpuResult | GpuResult] = []
    skipped = []
    if cpus and qemu is None:
        print(f"portable_check: {args.qemu} not found (Debian/Ubuntu: sudo apt-get install qemu-user): "
              f"the emulated CPUs ({', '.join(cpus)}) were not run", flush=True)
        skipped.append("emulated CPUs")
    for cpu in cpus if qemu else []:
        r = run_one(qemu, cpu, command, model, args.tokens, args.timeout, args.strace, emulated_env, ROOT)
        results.append(r)
        print(r.line(), flush=True)
    vulkan = args.vulkan == "on" or (args.vulkan == "auto" and has_vulkan_module(lib_dir))
    if args.vulkan == "auto" and not vulkan:
        print(f"portable_check: no libggml-vulkan.so in {lib_dir} (a build without the Vulkan tools): "
              "no Vulkan cases", flush=True)
    with tempfile.TemporaryDirectory(prefix="roofline-vulkan-") as scratch:
        for case in VULKAN_CASES if vulkan else ():
            s = run_engine(command, model, args.tokens, args.timeout, vulkan_env(case, env, Path(scratch)), ROOT,
                           load={"n_gpu_layers": -1})
            g = judge_vulkan(case, s, args.tokens)
            results.append(g)
            print(g.line(), flush=True)
    passed = sum(r.ok for r in results)
    print(f"portable_check: {passed}/{len(results)} cases loaded the model and generated {args.tokens} tokens"
          + (f"; not run: {', '.join(skipped)}" if skipped else ""))
    if passed < len(results):
        return 1
    return 2 if skipped or not results else 0


if __name__ == "__main__":
    sys.exit(main())
