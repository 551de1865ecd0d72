"""Load llama.cpp's ggml backends from llama_cpp's own library folder, and name the CPU variant that runs.

A portable llama.cpp build (`GGML_BACKEND_DL=ON`, `GGML_CPU_ALL_VARIANTS=ON`) ships no CPU code in libggml itself:
each ISA level is a module `libggml-cpu-<variant>.so` (sse42, sandybridge, haswell, skylakex, …), and ggml loads
the one that scores best on this CPU. ggml looks for those modules only next to the *executable* and in the
current directory (`ggml_backend_load_all`), i.e. beside python or the frozen app's launcher, never in
`llama_cpp/lib/`, and llama-cpp-python 0.3.36 does not tell it otherwise: without this module a portable build
loads no backend at all and every model load fails. `load_backends()` points ggml at llama_cpp's library folder
before anything asks llama.cpp for a backend. A native build has its CPU backend compiled in (the registry is not
empty) and is left alone.

`cpu_backend()` answers which library the CPU backend really lives in: the address of the registered CPU backend
is looked up with `dladdr`, so the answer is the module ggml chose, not merely one that happens to be mapped
(ggml opens every candidate to score it).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import llama_cpp

_VARIANT_FILE = re.compile(r"^(?:lib)?ggml-cpu(?:-(?P<variant>[\w.]+))?\.(?:so|dylib|dll)(?:\.\d+)*$")


@dataclass(frozen=True)
class CpuBackend:
    """Where llama.cpp's CPU code comes from in this process."""

    variant: str  # "haswell", "sse42", … for a portable build; "built-in" when compiled into the libraries
    library: str  # file name of the library holding the CPU backend ("" when unknown)
    features: str  # the backend's own feature list, e.g. "SSE3 SSSE3 AVX AVX2 F16C FMA BMI2 …"

    def describe(self) -> str:
        where = f" ({self.library})" if self.library else ""
        return f"{self.variant}{where}"


def ggml_library() -> Any:
    """llama_cpp's CDLL for libllama: dlsym through it also finds libggml's symbols (a dependency it loaded)."""
    lib = llama_cpp.llama_cpp._lib
    lib.ggml_backend_reg_count.argtypes = []
    lib.ggml_backend_reg_count.restype = ctypes.c_size_t
    lib.ggml_backend_reg_get.argtypes = [ctypes.c_size_t]
    lib.ggml_backend_reg_get.restype = ctypes.c_void_p
    lib.ggml_backend_reg_name.argtypes = [ctypes.c_void_p]
    lib.ggml_backend_reg_name.restype = ctypes.c_char_p
    lib.ggml_backend_reg_get_proc_address.argtypes = [ctypes.c_void_p, ctypes.c_char_p]
    lib.ggml_backend_reg_get_proc_address.restype = ctypes.c_void_p
    lib.ggml_backend_load_all_from_path.argtypes = [ctypes.c_char_p]
    lib.ggml_backend_load_all_from_path.restype = None
    return lib


def library_dir() -> Path:
    """The folder llama_cpp loaded libllama from (honours its LLAMA_CPP_LIB_PATH override)."""
    return Path(llama_cpp.llama_cpp._base_path)


def load_backends(lib_dir: Path | None = None) -> int:
    """Register ggml's dynamically loadable backends from `lib_dir` (default: llama_cpp's library folder) unless
    backends are already registered. Returns how many backends are registered afterwards."""
    lib = ggml_library()
    if lib.ggml_backend_reg_count() == 0:
        lib.ggml_backend_load_all_from_path(os.fsencode(lib_dir or library_dir()))
    return int(lib.ggml_backend_reg_count())


class _DlInfo(ctypes.Structure):
    _fields_ = [("dli_fname", ctypes.c_char_p), ("dli_fbase", ctypes.c_void_p),
                ("dli_sname", ctypes.c_char_p), ("dli_saddr", ctypes.c_void_p)]


def _library_of(address: int) -> str:
    """The file that holds `address` in this process ("" where dladdr is unavailable, e.g. Windows)."""
    if sys.platform == "win32" or not address:
        return ""
    libc = ctypes.CDLL(ctypes.util.find_library("c") if sys.platform == "darwin" else None)
    dladdr = getattr(libc, "dladdr", None)
    if dladdr is None:  # glibc before 2.34 keeps it in libdl
        dladdr = ctypes.CDLL(ctypes.util.find_library("dl") or "libdl.so.2").dladdr
    dladdr.argtypes = [ctypes.c_void_p, ctypes.POINTER(_DlInfo)]
    dladdr.restype = ctypes.c_int
    info = _DlInfo()
    if dladdr(ctypes.c_void_p(address), ctypes.byref(info)) == 0 or not info.dli_fname:
        return ""
    return os.fsdecode(info.dli_fname)


def variant_of(library_file: str) -> str:
    """`libggml-cpu-haswell.so` → `haswell`; the plain CPU library (native build) → `built-in`."""
    match = _VARIANT_FILE.match(Path(library_file).name)
    if match is None:
        return "built-in"
    return match.group("variant") or "built-in"


class _Feature(ctypes.Structure):
    _fields_ = [("name", ctypes.c_char_p), ("value", ctypes.c_char_p)]


def _features(lib: Any, reg: int) -> str:
    """The CPU backend's own list of enabled features (names whose value is "1")."""
    address = lib.ggml_backend_reg_get_proc_address(ctypes.c_void_p(reg), b"ggml_backend_get_features")
    if not address:
        return ""
    get_features = ctypes.CFUNCTYPE(ctypes.POINTER(_Feature), ctypes.c_void_p)(address)
    items = get_features(ctypes.c_void_p(reg))
    names = []
    for i in range(64):  # the list ends with a NULL name; 64 bounds a corrupt one
        if not items[i].name:
            break
        if items[i].value == b"1":
            names.append(items[i].name.decode(errors="replace"))
    return " ".join(names)


def cpu_backend() -> CpuBackend:
    """Which library holds the registered CPU backend, and its variant name. Call after `load_backends()`."""
    lib = ggml_library()
    for i in range(int(lib.ggml_backend_reg_count())):
        reg = lib.ggml_backend_reg_get(i)
        if (lib.ggml_backend_reg_name(reg) or b"").decode(errors="replace") != "CPU":
            continue
        path = _library_of(reg)
        return CpuBackend(variant=variant_of(path) if path else "unknown", library=Path(path).name,
                          features=_features(lib, reg))
    return CpuBackend(variant="none loaded", library="", features="")
