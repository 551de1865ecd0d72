"""The local model library: every GGUF the user has, wherever it lives, described from its header.

Sources: the app's models directory (downloads, quantizations, imports), the embedded default model, and GGUF
files already in the Hugging Face cache (HF_HUB_CACHE, or HF_HOME/hub, or ~/.cache/huggingface/hub). A file
that cannot be parsed is listed as broken with the reason: one bad file never hides the others. Split models
(-00001-of-0000N) are one entry, the first part, with the size of all parts.

Facts come from `app.core.gguf.info.inspect_gguf` (header only, cached by size+mtime). "Last used" lives in
data_dir()/library.json, written by `mark_used` when a model is loaded and when a reply of it ends.
"""

from __future__ import annotations

import json
import os
import shutil
import threading
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from app.core.config import paths
from app.core.files import atomic_write
from app.core.gguf.info import GGUFError, GGUFInfo, TensorInfo, inspect_gguf, parse_header, read_header_bytes
from app.core.gguf.split import SPLIT_NAME, merge_split, split_parts
from app.core.hub.downloads import PROVENANCE_SUFFIX, provenance_path

IMPORT_DIR = "imported"


class LibraryError(Exception):
    """A library operation was refused or failed; `str(err)` is a message for the user."""


class ConfirmationRequired(LibraryError):
    pass


@dataclass
class LocalModel:
    path: Path
    source: str  # "library" | "default" | "hf-cache" | "imported"
    name: str = ""
    architecture: str = ""
    n_params: int = 0
    quant: str = ""
    size: int = 0  # bytes on disk, all parts
    n_ctx_train: int = 0
    has_chat_template: bool = False
    last_used: datetime | None = None
    broken: str | None = None  # why the file cannot be used; None when fine
    provenance: dict[str, Any] = field(default_factory=dict)
    parts: list[Path] = field(default_factory=list)
    info: GGUFInfo | None = field(default=None, repr=False, compare=False)

    @property
    def removable(self) -> bool:
        return self.source != "default"

    def to_dict(self) -> dict[str, Any]:
        return {
            "path": str(self.path), "source": self.source, "name": self.name, "architecture": self.architecture,
            "n_params": self.n_params, "quant": self.quant, "size": self.size, "n_ctx_train": self.n_ctx_train,
            "has_chat_template": self.has_chat_template,
            "last_used": self.last_used.isoformat() if self.last_used else None,
            "broken": self.broken, "provenance": self.provenance, "parts": [str(p) for p in self.parts],
        }


# ---------------------------------------------------------------- where models live


def hf_cache_dir() -> Path:
    if os.environ.get("HF_HUB_CACHE"):
        return Path(os.environ["HF_HUB_CACHE"]).expanduser()
    home = os.environ.get("HF_HOME")
    base = Path(home).expanduser() if home else Path.home() / ".cache" / "huggingface"
    return base / "hub"


def _is_first_or_single(path: Path) -> bool:
    m = SPLIT_NAME.search(path.name)
    return not m or int(m.group(1)) == 1


def _candidates(root: Path) -> list[Path]:
    if not root.is_dir():
        return []
    out = []
    for p in root.rglob("*.gguf"):
        if p.name.startswith(".") or "mmproj" in p.name.lower() or not _is_first_or_single(p):
            continue
        out.append(p)
    return sorted(out)


def model_files(root: Path) -> list[Path]:
    """The loadable GGUF files under `root`, sub-folders included (first part of split models only)."""
    return _candidates(root)


# ---------------------------------------------------------------- last used


_used_lock = threading.Lock()


def _used_file() -> Path:
    return paths.data_dir() / "library.json"


def _load_used() -> dict[str, str]:
    try:
        data = json.loads(_used_file().read_text())
        return dict(data.get("last_used", {}))
    except (OSError, ValueError, AttributeError):
        return {}


def mark_used(path: str | Path, when: datetime | None = None) -> datetime:
    """Record that a model was used (loaded, or a reply of it ended) at `when` (now); returns that time."""
    when = when or datetime.now(UTC)
    with _used_lock:
        used = _load_used()
        used[str(Path(path).absolute())] = when.isoformat()
        atomic_write.write_json(_used_file(), {"last_used": used})
    return when


# ---------------------------------------------------------------- describing files


_info_cache: dict[tuple[str, int, int], GGUFInfo] = {}


def describe(path: Path, source: str, used: dict[str, str] | None = None) -> LocalModel:
    """One library entry; never raises for a bad file (the entry says why it is broken)."""
    try:
        return _describe(path, source, used)
    except Exception as exc:  # noqa: BLE001 - whatever a hostile file triggers, the library still lists it
        model = LocalModel(path=path, source=source, name=path.name)
        model.broken = f"not a usable GGUF file: {type(exc).__name__}: {exc}"
        return model


def _describe(path: Path, source: str, used: dict[str, str] | None) -> LocalModel:
    model = LocalModel(path=path, source=source, name=path.name)
    split = split_parts(path)  # bounded: a name claiming 99,999 parts gives one short line, not 99,999 names
    parts = model.parts = split.parts
    model.size = sum(p.stat().st_size for p in parts if p.exists())
    stamp = (used or {}).get(str(path.absolute()))
    if stamp:
        try:
            model.last_used = datetime.fromisoformat(stamp)
        except ValueError:
            pass
    prov = provenance_path(path)
    if prov.exists():
        try:
            loaded = json.loads(prov.read_text())
            model.provenance = loaded if isinstance(loaded, dict) else {}
        except (OSError, ValueError):
            model.provenance = {}
    if not path.exists():
        model.broken = "file missing (a link to a file that was moved or deleted?)"
        return model
    if split.problem:
        model.broken = split.problem
    try:
        st = path.stat()
        key = (str(path), st.st_size, st.st_mtime_ns)
        info = _info_cache.get(key)
        if info is None:
            info = inspect_gguf(path)
            _info_cache[key] = info
    except GGUFError as exc:
        model.broken = f"not a usable GGUF file: {exc}"
        return model
    except OSError as exc:
        model.broken = f"cannot read: {exc.strerror or exc}"
        return model
    model.info = info
    model.name = info.name or path.stem
    model.architecture = info.architecture
    model.n_params = info.n_params
    model.quant = info.file_type
    model.n_ctx_train = info.n_ctx_train
    model.has_chat_template = info.has_chat_template
    if len(parts) > 1 and split.complete:
        # Each part has its own tensor table and only the first has model metadata: merge them.
        others = []
        for p in parts[1:]:
            try:
                others.append(_part_tensors(p))
            except (GGUFError, OSError) as exc:
                model.broken = f"part {p.name}: {exc}"
        if model.broken is None:
            model.info = merge_split(info, others)
            model.n_params = model.info.n_params
    return model


def _part_tensors(path: Path) -> list[TensorInfo]:
    size = path.stat().st_size
    with path.open("rb") as fh:
        def read_at(n: int) -> bytes:
            fh.seek(0)
            return fh.read(n)

        return parse_header(read_header_bytes(read_at, size), size).tensors


def _default_model_path() -> Path | None:
    from app.core.models.default_model import default_model_path

    try:
        p = default_model_path(ensure=False)
    except Exception:  # noqa: BLE001 - a missing data package must not break the library
        return None
    return p if p.exists() else None


def list_models() -> list[LocalModel]:
    """Everything in the library, default model first, then by name."""
    used = _load_used()
    seen: set[Path] = set()
    out: list[LocalModel] = []

    def add(p: Path, source: str) -> None:
        key = p.absolute()
        if key in seen:
            return
        seen.add(key)
        out.append(describe(p, source, used))

    default = _default_model_path()
    if default is not None:
        add(default, "default")
    mdir = paths.models_dir()
    for p in _candidates(mdir):
        if p.is_symlink() or IMPORT_DIR in p.relative_to(mdir).parts[:1]:
            add(p, "imported")
        else:
            add(p, "library")
    for p in sorted(mdir.rglob("*.gguf")):  # dangling links do not show up in rglob's is_file sense
        if p.is_symlink() and not p.exists():
            add(p, "imported")
    for p in _candidates(hf_cache_dir()):
        add(p, "hf-cache")
    head = [m for m in out if m.source == "default"]
    rest = sorted((m for m in out if m.source != "default"), key=lambda m: (m.name.lower(), str(m.path)))
    return head + rest


def find(path: str | Path) -> LocalModel | None:
    target = Path(path).absolute()
    return next((m for m in list_models() if m.path.absolute() == target), None)


# ---------------------------------------------------------------- import and remove


def import_model(src: str | Path, link: bool = False) -> LocalModel:
    """Bring a GGUF file into the library: a copy (default) or a symbolic link to where it is.

    The file is checked first: a file that is not a GGUF model is refused rather than imported broken.
    """
    src = Path(src).expanduser().absolute()
    if not src.is_file():
        raise LibraryError(f"no such file: {src}")
    try:
        inspect_gguf(src)
    except GGUFError as exc:
        raise LibraryError(f"{src.name} is not a usable GGUF model: {exc}") from exc
    split = split_parts(src)
    if split.problem:  # copying what is there would import a model that cannot load
        raise LibraryError(f"{src.name}: {split.problem}")
    sources = split.parts
    dest_dir = paths.models_dir() / IMPORT_DIR
    dest_dir.mkdir(parents=True, exist_ok=True)
    for part in sources:
        dest = dest_dir / part.name
        if dest.exists() or dest.is_symlink():
            raise LibraryError(f"a model named {part.name} is already imported")
    for part in sources:
        dest = dest_dir / part.name
        if link:
            dest.symlink_to(part)
        else:
            tmp = dest.with_name(dest.name + ".importing")
            shutil.copyfile(part, tmp)
            os.replace(tmp, dest)
    first = dest_dir / src.name
    from app.core.hub.downloads import write_provenance

    write_provenance(first, {"source": "import", "original": str(src), "mode": "link" if link else "copy",
                             "imported": datetime.now(UTC).isoformat()})
    return describe(first, "imported", _load_used())


def remove(path: str | Path, confirm: bool = False) -> list[Path]:
    """Delete a model (all its parts and sidecars). Needs `confirm=True`: deleting gigabytes is not undoable.

    Imported links lose only the link, never the user's original file. The embedded default model is not
    removable (it is rebuilt on demand anyway). Returns the paths deleted.
    """
    model = find(path)
    if model is None:
        raise LibraryError(f"not in the library: {path}")
    if not model.removable:
        raise LibraryError("the embedded default model cannot be removed")
    if not confirm:
        raise ConfirmationRequired(f"removing {model.path.name} deletes {model.size} bytes: confirm to proceed")
    removed: list[Path] = []
    for part in model.parts:
        if part.is_symlink():
            target = part.resolve()
            part.unlink()
            removed.append(part)
            # In the HF cache a snapshot entry links to a blob that holds the bytes: remove both.
            if model.source == "hf-cache" and target.exists() and "blobs" in target.parts:
                target.unlink()
                removed.append(target)
        elif part.exists():
            part.unlink()
            removed.append(part)
    for extra in (provenance_path(model.path),):
        if extra.exists():
            extra.unlink()
            removed.append(extra)
    _info_cache.clear()
    return removed


__all__ = [
    "PROVENANCE_SUFFIX",
    "ConfirmationRequired",
    "LibraryError",
    "LocalModel",
    "describe",
    "find",
    "hf_cache_dir",
    "import_model",
    "list_models",
    "mark_used",
    "remove",
]
