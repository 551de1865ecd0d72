"""Check that a llama-cpp-python wheel is the portable x86-64 build scripts/package needs.

Portable means: llama.cpp's CPU code is split into runtime-dispatched modules `llama_cpp/lib/libggml-cpu-<variant>.so`
(one per ISA level, see docs/packaging.md), the levels a user's CPU can need are all there, there is no AMX variant
(virtual machines that advertise AMX but fault on it would pick it), and there is no single `libggml-cpu.so`
compiled for one machine; with `--require vulkan` (or cuda) that GPU backend's loadable module is there too.
Usage: python check_portable_wheel.py WHEEL [--require BACKEND]...; exit 1 with one line per problem.
"""

from __future__ import annotations

import re
import sys
import zipfile
from pathlib import Path

# The ISA levels the bundle promises to run on (docs/packaging.md): SSE4.2 is the minimum, x64 the fallback.
REQUIRED_VARIANTS = ("x64", "sse42", "sandybridge", "haswell", "skylakex", "icelake", "alderlake", "zen4")
FORBIDDEN_VARIANTS = ("sapphirerapids",)  # the only one built with -mamx-tile/-mamx-int8
_VARIANT = re.compile(r"^llama_cpp/lib/libggml-cpu-(?P<variant>[\w.]+)\.so$")


def variants_in(names: list[str]) -> set[str]:
    """The CPU variant modules among a wheel's file names."""
    return {m.group("variant") for m in map(_VARIANT.match, names) if m}


def gpu_modules_in(names: list[str]) -> set[str]:
    """The GPU backend modules among a wheel's file names ("vulkan", "cuda")."""
    return {m.group(1) for m in map(re.compile(r"^llama_cpp/lib/libggml-(vulkan|cuda|hip)\.so$").match, names) if m}


def problems(names: list[str], require: tuple[str, ...] = ()) -> list[str]:
    """What keeps a wheel with these file names from being the portable build (empty when it is)."""
    found = variants_in(names)
    missing_gpu = [b for b in require if b not in gpu_modules_in(names)]
    out = [f"missing CPU variant module libggml-cpu-{v}.so" for v in REQUIRED_VARIANTS if v not in found]
    out += [f"AMX variant libggml-cpu-{v}.so is present (it faults on VMs that advertise AMX)"
            for v in FORBIDDEN_VARIANTS if v in found]
    if any(re.match(r"^llama_cpp/lib/libggml-cpu\.so(\.\d+)*$", n) for n in names):
        out.append("a single libggml-cpu.so is present: this is a one-machine build, not runtime dispatch")
    if not any(re.match(r"^llama_cpp/lib/libllama\.so", n) for n in names):
        out.append("no llama_cpp/lib/libllama.so")
    out += [f"no loadable {b} backend module llama_cpp/lib/libggml-{b}.so" for b in missing_gpu]
    return out


def main(argv: list[str]) -> int:
    require = tuple(argv[i + 1] for i, a in enumerate(argv[:-1]) if a == "--require")
    rest = [a for i, a in enumerate(argv) if a != "--require" and (i == 0 or argv[i - 1] != "--require")]
    if len(rest) != 1:
        print("usage: check_portable_wheel.py WHEEL [--require BACKEND]...", file=sys.stderr)
        return 2
    wheel = Path(rest[0])
    try:
        names = zipfile.ZipFile(wheel).namelist()
    except (OSError, zipfile.BadZipFile) as exc:
        print(f"check_portable_wheel: cannot read {wheel}: {exc}", file=sys.stderr)
        return 1
    found = problems(names, require)
    for line in found:
        print(f"check_portable_wheel: {wheel.name}: {line}", file=sys.stderr)
    if not found:
        gpu = " ".join(sorted(gpu_modules_in(names))) or "none"
        print(f"check_portable_wheel: {wheel.name}: CPU variants {' '.join(sorted(variants_in(names)))}; "
              f"GPU backends {gpu}", file=sys.stderr)
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
