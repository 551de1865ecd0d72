"""Decisions of packaging/roofline.spec that tests can check without running PyInstaller."""

from __future__ import annotations

import re
from pathlib import Path

MODEL_DEST = "models"  # inside the app folder's _internal/ (sys._MEIPASS); see packaging/rthook_roofline.py


def llama_libraries(lib_dir: Path) -> list[Path]:
    """The llama.cpp shared libraries to ship from llama_cpp/lib/.

    llama-cpp-python opens `libllama.so` (`.dylib`, `.dll`) itself with ctypes; on Linux the libraries then ask
    each other for their `.so.0` SONAMEs, found through RUNPATH $ORIGIN. The fully versioned copies
    (`.so.0.25.3`) are never opened and are left out.
    """
    keep = re.compile(r"\.so(\.\d+)?$|\.dylib$|\.dll$|\.metal$")
    return sorted(p for p in lib_dir.iterdir() if p.is_file() and keep.search(p.name))
