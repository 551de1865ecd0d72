"""Decisions of packaging/roofline.spec that tests can check without running PyInstaller."""

from __future__ import annotations

import re
from pathlib import Path

MODEL_DEST = "models"  # inside the app folder's _internal/ (sys._MEIPASS); see packaging/rthook_roofline.py
# Libraries the user's system must provide, never the bundle: the Vulkan loader (libggml-vulkan.so needs it) has to
# match the machine's installed drivers and their manifests; a bundled copy would shadow the system's. Where it is
# missing, dlopen of libggml-vulkan.so fails and ggml runs on its CPU modules.
SYSTEM_LIBRARIES = re.compile(r"^libvulkan\.so(\.\d+)*$")


def llama_libraries(lib_dir: Path) -> list[Path]:
    """The llama.cpp shared libraries to ship from llama_cpp/lib/.

    llama-cpp-python opens `libllama.so` (`.dylib`, `.dll`) itself with ctypes; on Linux the libraries then ask
    each other for their `.so.0` SONAMEs, found through RUNPATH $ORIGIN. The fully versioned copies
    (`.so.0.25.3`) are never opened and are left out.
    """
    keep = re.compile(r"\.so(\.\d+)?$|\.dylib$|\.dll$|\.metal$")
    return sorted(p for p in lib_dir.iterdir() if p.is_file() and keep.search(p.name))


def bundled_binaries(binaries: list[tuple[str, str, str]]) -> list[tuple[str, str, str]]:
    """PyInstaller's collected binaries (dest name, source, type) without the SYSTEM_LIBRARIES it found as
    dependencies."""
    return [b for b in binaries if not SYSTEM_LIBRARIES.match(Path(b[0]).name)]
