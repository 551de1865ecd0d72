"""The local library: models dir, default model, HF cache, imports, broken files, removal."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from app.core.config import paths
from app.core.models import library
from synth_gguf import write_synthetic_gguf


@pytest.fixture
def hf_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = tmp_path / "hf"
    monkeypatch.setenv("HF_HOME", str(home))
    monkeypatch.delenv("HF_HUB_CACHE", raising=False)
    return home


def _hf_cache_entry(hf_home: Path, repo: str, name: str, src: Path) -> Path:
    """Lay a file out the way huggingface_hub does: blobs/<sha> plus a snapshot symlink."""
    root = hf_home / "hub" / ("models--" + repo.replace("/", "--"))
    blob = root / "blobs" / "abc123"
    blob.parent.mkdir(parents=True)
    blob.write_bytes(src.read_bytes())
    snap = root / "snapshots" / ("0" * 40) / name
    snap.parent.mkdir(parents=True)
    snap.symlink_to(os.path.relpath(blob, snap.parent))
    return snap


def test_lists_every_source_with_facts(default_model: Path, hf_home: Path, tmp_path: Path) -> None:
    mdir = paths.models_dir()
    (mdir / "acme").mkdir()
    lib_file = write_synthetic_gguf(mdir / "acme" / "tiny-f16.gguf", tensor_type="F16", n_ctx=4096,
                                    chat_template="{{ messages }}", name="Tiny Chat")
    src = write_synthetic_gguf(tmp_path / "cached-q8_0.gguf", tensor_type="Q8_0", n_layers=1)
    cached = _hf_cache_entry(hf_home, "someone/cached-GGUF", "cached-q8_0.gguf", src)
    library.mark_used(lib_file)

    models = {m.path: m for m in library.list_models()}
    dm = models[default_model]
    assert dm.source == "default" and not dm.removable and dm.broken is None
    assert dm.architecture == "gemma3" and dm.quant == "Q4_K_M" and dm.n_ctx_train == 32768
    assert not dm.has_chat_template and dm.size == default_model.stat().st_size
    assert 200e6 < dm.n_params < 300e6  # "270M"

    lm = models[lib_file]
    assert lm.source == "library" and lm.name == "Tiny Chat" and lm.quant == "F16"
    assert lm.has_chat_template and lm.n_ctx_train == 4096 and lm.last_used is not None
    assert models[cached].source == "hf-cache" and models[cached].quant == "Q8_0"
    assert models[cached].size == src.stat().st_size
    assert list(library.list_models())[0].source == "default"


def test_broken_file_listed_with_reason_not_raised(tmp_path: Path) -> None:
    mdir = paths.models_dir()
    (mdir / "garbage.gguf").write_bytes(b"NOPE" + b"\0" * 100)
    good = write_synthetic_gguf(tmp_path / "g.gguf")
    trunc = mdir / "truncated.gguf"
    trunc.write_bytes(good.read_bytes()[:200])
    models = {m.path.name: m for m in library.list_models()}
    assert "GGUF" in (models["garbage.gguf"].broken or "") or "magic" in (models["garbage.gguf"].broken or "")
    assert models["truncated.gguf"].broken and "not a usable GGUF" in models["truncated.gguf"].broken


def test_split_model_is_one_entry_with_all_parts(tmp_path: Path) -> None:
    mdir = paths.models_dir()
    a = write_synthetic_gguf(mdir / "m-Q8_0-00001-of-00002.gguf", tensor_type="Q8_0", n_layers=1)
    b = write_synthetic_gguf(mdir / "m-Q8_0-00002-of-00002.gguf", tensor_type="Q8_0", n_layers=1, seed=1)
    models = [m for m in library.list_models() if m.source == "library"]
    assert len(models) == 1
    assert models[0].size == a.stat().st_size + b.stat().st_size
    b.unlink()
    (m,) = [m for m in library.list_models() if m.source == "library"]
    assert m.broken and "missing" in m.broken


def test_a_split_name_claiming_thousands_of_parts_gives_one_short_line(tmp_path: Path) -> None:
    import subprocess
    import sys

    mdir = paths.models_dir()
    write_synthetic_gguf(mdir / "x-00001-of-65535.gguf", n_layers=1)
    write_synthetic_gguf(mdir / "x-00003-of-65535.gguf", n_layers=1)
    write_synthetic_gguf(mdir / "y-00001-of-99999.gguf", n_layers=1)
    models = {m.path.name: m for m in library.list_models() if m.source == "library"}
    x, y = models["x-00001-of-65535.gguf"], models["y-00001-of-99999.gguf"]
    assert x.broken == ("split model incomplete: missing 65,533 of 65,535 parts: x-00002-of-65535.gguf, "
                        "x-00004-of-65535.gguf, x-00005-of-65535.gguf, …")
    assert [p.name for p in x.parts] == ["x-00001-of-65535.gguf", "x-00003-of-65535.gguf"]  # what is there
    assert y.broken and "claims 99,999 parts" in y.broken and "65,535" in y.broken and y.parts == [y.path]
    root = Path(__file__).resolve().parents[3]
    for args in (["models", "--json"], ["models"]):
        proc = subprocess.run([sys.executable, "-m", "app.cli", *args], capture_output=True, text=True,
                              timeout=120, cwd=root)
        assert proc.returncode == 0, proc.stderr
        assert len(proc.stdout) < 10_000, len(proc.stdout)  # was 7.7 MB for the 99,999 name
    with pytest.raises(library.LibraryError, match="split model incomplete: missing 65,533 of 65,535"):
        library.import_model(mdir / "x-00001-of-65535.gguf")
    assert not (mdir / library.IMPORT_DIR).exists() or not any((mdir / library.IMPORT_DIR).iterdir())


def test_a_split_model_spelt_in_capitals_finds_its_parts() -> None:
    mdir = paths.models_dir()
    a = write_synthetic_gguf(mdir / "M-Q8_0-00001-OF-00002.GGUF", tensor_type="Q8_0", n_layers=1)
    b = write_synthetic_gguf(mdir / "M-Q8_0-00002-OF-00002.GGUF", tensor_type="Q8_0", n_layers=1, seed=1)
    m = library.describe(a, "library")  # (the library lists *.gguf; a file given by path may be .GGUF)
    assert m.broken is None and m.parts == [a, b] and m.size == a.stat().st_size + b.stat().st_size


def test_import_copy_and_link_and_remove(tmp_path: Path) -> None:
    src = write_synthetic_gguf(tmp_path / "outside.gguf", n_layers=1)
    copied = library.import_model(src)
    assert copied.path.exists() and not copied.path.is_symlink() and copied.broken is None
    with pytest.raises(library.LibraryError, match="already imported"):
        library.import_model(src, link=True)
    other = write_synthetic_gguf(tmp_path / "linked.gguf", n_layers=1, seed=3)
    linked = library.import_model(other, link=True)
    assert linked.path.is_symlink() and linked.source == "imported"

    with pytest.raises(library.ConfirmationRequired):
        library.remove(linked.path)
    assert linked.path.is_symlink()
    library.remove(linked.path, confirm=True)
    assert not linked.path.exists() and other.exists()  # the user's original is untouched
    library.remove(copied.path, confirm=True)
    assert not copied.path.exists() and src.exists()
    assert not any(m.source == "imported" for m in library.list_models())


def test_import_refuses_non_gguf(tmp_path: Path) -> None:
    bad = tmp_path / "notes.gguf"
    bad.write_text("hello")
    with pytest.raises(library.LibraryError, match="not a usable GGUF"):
        library.import_model(bad)


def test_dangling_link_listed_as_broken(tmp_path: Path) -> None:
    src = write_synthetic_gguf(tmp_path / "moved.gguf", n_layers=1)
    m = library.import_model(src, link=True)
    src.unlink()
    (entry,) = [x for x in library.list_models() if x.path == m.path]
    assert entry.broken and "missing" in entry.broken


def test_default_model_not_removable(default_model: Path) -> None:
    with pytest.raises(library.LibraryError, match="default model"):
        library.remove(default_model, confirm=True)
    assert default_model.exists()


def test_hf_cache_removal_deletes_blob(hf_home: Path, tmp_path: Path) -> None:
    src = write_synthetic_gguf(tmp_path / "c.gguf", n_layers=1)
    snap = _hf_cache_entry(hf_home, "x/y", "c-Q8_0.gguf", src)
    blob = snap.resolve()
    library.remove(snap, confirm=True)
    assert not snap.is_symlink() and not blob.exists()
