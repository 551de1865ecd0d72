"""A hostile hub on loopback: a "sha256" that is a path, a repo claiming another repo's file, a header of
hundreds of megabytes, a file body that never ends, a file name of thousands of characters. Nothing may be
written outside our folders, nothing read without a bound, and each case ends in one clear line."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from app.core.config import paths
from app.core.gguf import remote_header as remote_gguf
from app.core.hub import downloads
from app.core.hub import listing as hub
from hubserver import COMMIT, HubServer, sha256_of
from reliability_plugin import hostile_tried, record
from synth_gguf import write_synthetic_gguf

ROOT = Path(__file__).resolve().parents[2]


def _files_under(root: Path) -> set[Path]:
    return {p for p in root.rglob("*") if p.is_file()}


# ---------------------------------------------------------------------------------------------- finding 1


@pytest.mark.parametrize("kind", ["absolute", "relative"])
def test_a_path_given_as_sha256_never_names_a_file(kind: str, hub_server: HubServer, tmp_path: Path) -> None:
    victim = tmp_path / "victim"
    victim.with_suffix(".bin").write_bytes(b"the user's own file")
    cache = paths.cache_dir() / "remote-headers"
    cache.mkdir(parents=True, exist_ok=True)
    sha = str(victim) if kind == "absolute" else os.path.relpath(victim, cache)
    src = write_synthetic_gguf(tmp_path / "src.gguf", n_layers=1)
    hub_server.state.add_repo("acme/Evil-GGUF", {"m-Q8_0.gguf": src})
    hub_server.state.sha_override["m-Q8_0.gguf"] = sha
    before = _files_under(tmp_path)

    # A HubFile holding that string (from any caller) still gets a cache entry of our own naming...
    got = remote_gguf.fetch_header("acme/Evil-GGUF", COMMIT, hub.HubFile("m-Q8_0.gguf", src.stat().st_size, sha))
    assert got.info is not None and got.info.n_layers == 1
    assert victim.with_suffix(".bin").read_bytes() == b"the user's own file"
    new = _files_under(tmp_path) - before
    assert new and all(p.parent == cache and len(p.stem) == 64 for p in new), new
    # ...and the listing that carries it is refused at the edge, in one line.
    with pytest.raises(hub.HubError, match="invalid sha256") as err:
        hub.list_variants("acme/Evil-GGUF")
    assert "\n" not in str(err.value)
    record("hostile inputs refused")


def test_a_repo_cannot_plant_its_header_for_another_repos_file(hub_server: HubServer, tmp_path: Path) -> None:
    honest = write_synthetic_gguf(tmp_path / "honest.gguf", n_layers=1, name="honest", n_ctx=2048)
    planted = write_synthetic_gguf(tmp_path / "planted.gguf", n_layers=1, name="plants", n_ctx=4096)
    assert honest.stat().st_size == planted.stat().st_size  # so size checks cannot tell them apart
    hub_server.state.add_repo("evil/Plant-GGUF", {"x-Q8_0.gguf": planted})
    hub_server.state.add_repo("good/Model-GGUF", {"m-Q8_0.gguf": honest})
    hub_server.state.sha_override["x-Q8_0.gguf"] = sha256_of(honest)  # evil claims the honest file's hash
    evil = hub.list_variants("evil/Plant-GGUF")
    remote_gguf.fetch_header(evil.repo_id, evil.revision, evil.variants[0].first)
    good = hub.list_variants("good/Model-GGUF")
    got = remote_gguf.fetch_header(good.repo_id, good.revision, good.variants[0].first)
    assert got.info is not None and (got.info.name, got.info.n_ctx_train) == ("honest", 2048)
    assert not got.cached
    record("hostile inputs refused")


# ---------------------------------------------------------------------------------------------- finding 6


def test_a_remote_header_larger_than_the_cap_is_not_fetched(hub_server: HubServer, tmp_path: Path,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    assert remote_gguf.header_limit() == 64 << 20  # the default
    big = write_synthetic_gguf(tmp_path / "big.gguf", n_layers=1,
                               extra_metadata={"general.description": "x" * (3 << 20)})
    hub_server.state.add_repo("acme/Big-GGUF", {"big-Q8_0.gguf": big})
    rv = hub.list_variants("acme/Big-GGUF")
    monkeypatch.setenv("ROOFLINE_MAX_REMOTE_HEADER_MIB", "1")  # the setting, as an env override
    assert remote_gguf.header_limit() == 1 << 20
    (vh,) = remote_gguf.fetch_variant_headers(rv)
    assert vh.info is None and vh.error and "max_remote_header_mib" in vh.error and "\n" not in vh.error
    assert hub_server.state.served("big-Q8_0.gguf") <= 1 << 20
    assert not list((paths.cache_dir() / "remote-headers").glob("*.bin"))
    record("hostile inputs refused")
    # Under the default cap the same header is read: the cap, not the file, was the reason.
    monkeypatch.delenv("ROOFLINE_MAX_REMOTE_HEADER_MIB")
    (vh,) = remote_gguf.fetch_variant_headers(rv)
    assert vh.error is None and vh.info is not None


# ---------------------------------------------------------------------------------------------- finding 7


def test_a_download_stops_when_the_body_outgrows_the_listed_size(hub_server: HubServer, tmp_path: Path) -> None:
    src = write_synthetic_gguf(tmp_path / "src.gguf", n_layers=1)
    size = src.stat().st_size
    hub_server.state.add_repo("acme/Endless-GGUF", {"e-Q8_0.gguf": src})
    hub_server.state.endless.add("e-Q8_0.gguf")
    rv = hub.list_variants("acme/Endless-GGUF")
    task = downloads.plan(rv.variants[0], rv.repo_id, rv.revision, paths.models_dir())
    with pytest.raises(downloads.DownloadError, match="sent more than the .* bytes it listed") as err:
        downloads.download_variant(task)
    assert "\n" not in str(err.value)
    # Stopped within a few reads of the listed size (the old code wrote on to the server's 64 MiB limit).
    assert hub_server.state.served("e-Q8_0.gguf") < size + (8 << 20)
    leftovers = [p for p in paths.models_dir().rglob("*") if p.is_file()]
    assert leftovers == [] and not task.dest.exists()
    hostile_tried()


# ---------------------------------------------------------------------------------------------- finding 12


def test_a_very_long_hub_file_name_is_refused_in_one_line_leaving_no_folders(hub_server: HubServer,
                                                                             tmp_path: Path) -> None:
    src = write_synthetic_gguf(tmp_path / "src.gguf", n_layers=1)
    long_name = "a" * 4000 + "-Q8_0.gguf"
    hub_server.state.add_repo("acme/Long-GGUF", {long_name: src})
    proc = subprocess.run([sys.executable, "-m", "app.cli", "pull", "acme/Long-GGUF:Q8_0", "--quiet"],
                          capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert proc.returncode == 1, proc.stderr
    assert "Traceback" not in proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "longer than 200 bytes" in lines[0] and len(lines[0]) < 400, lines
    models = paths.models_dir()
    assert not models.exists() or list(models.rglob("*")) == []
    assert hub_server.state.served(long_name) == 0
    record("hostile inputs refused")


def test_name_length_limits_are_per_part_and_in_bytes(tmp_path: Path) -> None:
    models = tmp_path / "models"
    models.mkdir()
    ok = "b" * 200 + ".gguf"
    with pytest.raises(downloads.UnsafeFilename, match="longer than"):
        downloads.destination(models, "acme/repo", ok)  # 205 bytes
    downloads.destination(models, "acme/repo", "b" * 195 + ".gguf")  # 200 bytes: fine
    with pytest.raises(downloads.UnsafeFilename, match="longer than"):
        downloads.destination(models, "acme/repo", "é" * 101 + ".gguf")  # 101 characters, 207 bytes
    with pytest.raises(downloads.UnsafeFilename, match="longer than"):
        downloads.destination(models, "acme/repo", "/".join(["c" * 150] * 7))  # parts fine, 1056 bytes in all
    assert os.listdir(models) == []
    record("hostile inputs refused", 3)


def test_a_failed_first_attempt_leaves_no_empty_folders(hub_server: HubServer, tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    src = write_synthetic_gguf(tmp_path / "src.gguf", n_layers=1)
    hub_server.state.add_repo("acme/Gone-GGUF", {"sub/g-Q8_0.gguf": src})
    rv = hub.list_variants("acme/Gone-GGUF")
    task = downloads.plan(rv.variants[0], rv.repo_id, rv.revision, paths.models_dir())

    def no_disk(directory: Path, needed: int) -> None:
        raise downloads.InsufficientDisk("no space (simulated)")

    monkeypatch.setattr(downloads, "check_disk", no_disk)
    paths.models_dir().mkdir(parents=True, exist_ok=True)
    with pytest.raises(downloads.InsufficientDisk):
        downloads.download_file(task.files[0], base_done=0, progress=downloads.Progress())
    assert list(paths.models_dir().rglob("*")) == []


def test_reading_the_header_cap_leaves_a_damaged_settings_file_alone() -> None:
    from app.core.config.settings import settings_path

    path = settings_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("{broken")
    assert remote_gguf.header_limit() == 64 << 20  # the default, from a background reader...
    assert path.read_text() == "{broken" and list(path.parent.iterdir()) == [path]  # ...which moved nothing


# ---------------------------------------------------------------------------------------------- names that deceive

def _refused_plan(hub_server: HubServer, tmp_path: Path, repo: str, name: str, reason: str) -> str:
    """A repo listing one hostile file name: planning its download is refused for `reason` before any byte
    is served. The refusal's message."""
    src = write_synthetic_gguf(tmp_path / "src.gguf", n_layers=1)
    hub_server.state.add_repo(repo, {name: src})
    rv = hub.list_variants(repo)
    (variant,) = rv.variants
    with pytest.raises(downloads.UnsafeFilename, match=reason) as err:
        downloads.plan(variant, rv.repo_id, rv.revision, paths.models_dir())
    assert hub_server.state.served(name) == 0
    record("hostile inputs refused")
    return str(err.value)


DEVICE_NAMES = ["CON.Q8_0.gguf", "nul.Q8_0.gguf", "Aux.Q8_0.tar.gguf", "sub/COM1 .Q8_0.gguf", "lpt9.Q8_0.gguf",
                "prn/m-Q8_0.gguf", "COM\u00b9.Q8_0.gguf", "conout$.Q8_0.gguf"]


@pytest.mark.parametrize("name", DEVICE_NAMES)
def test_a_hub_file_named_after_a_windows_device_is_refused(name: str, hub_server: HubServer,
                                                             tmp_path: Path) -> None:
    message = _refused_plan(hub_server, tmp_path, "acme/Dev-GGUF", name, "is the Windows device")
    assert "\n" not in message
    assert not paths.models_dir().exists() or list(paths.models_dir().rglob("*")) == []


@pytest.mark.parametrize("name", ["CONSOLE.Q8_0.gguf", "COM10.Q8_0.gguf", "icon-Q8_0.gguf", "LPT-Q8_0.gguf",
                                  "nullify.Q8_0.gguf", "sub/auxiliary/m-Q8_0.gguf", "m.con.Q8_0.gguf"])
def test_names_that_only_look_like_devices_are_fine(name: str, tmp_path: Path) -> None:
    dest = downloads.destination(tmp_path, "acme/repo", name)
    assert dest.name == name.rsplit("/", 1)[-1]


def test_one_function_names_the_windows_devices() -> None:
    from app.core.files.untrusted import windows_device_name

    assert [windows_device_name(n) for n in ("CON", "con.md", "Nul.tar.gz", "AUX.", "com1 ", "LPT0.x. .",
                                             "NUL .txt", "CONIN$", "lpt\u00b3.gguf")] == [
        "CON", "CON", "NUL", "AUX", "COM1", "LPT0", "NUL", "CONIN$", "LPT\u00b3"]
    assert [windows_device_name(n) for n in ("CONSOLE", "COM10", "x.CON", "LPT", "", ".", "nul_", "con-1")] == [
        None] * 8


@pytest.mark.parametrize("name", ["invoice\u202eFUGG-Q8_0.gguf", "m-Q8_0\u200b.gguf", "sub\u2066/m-Q8_0.gguf",
                                  "m\U000e0041-Q8_0.gguf"])
def test_a_hub_file_name_with_a_hidden_character_is_refused(name: str, hub_server: HubServer,
                                                            tmp_path: Path) -> None:
    message = _refused_plan(hub_server, tmp_path, "acme/Bidi-GGUF", name, "refusing unsafe file name")
    assert "<U+" in message and not any(c in message for c in "\u202e\u200b\u2066\U000e0041")


def test_search_leaves_out_repo_ids_that_read_as_another(hub_server: HubServer, tmp_path: Path) -> None:
    src = write_synthetic_gguf(tmp_path / "src.gguf", n_layers=1)
    hub_server.state.add_repo("acme/Honest-GGUF", {"h-Q8_0.gguf": src}, downloads=5)
    hub_server.state.add_repo("acme/\u202eFUGG-tsenoH", {"e-Q8_0.gguf": src}, downloads=9)
    hub_server.state.add_repo("acme/Zero\u200bWidth-GGUF", {"z-Q8_0.gguf": src}, downloads=7)
    assert [r.repo_id for r in hub.search("acme")] == ["acme/Honest-GGUF"]
    proc = subprocess.run([sys.executable, "-m", "app.cli", "search", "acme"], capture_output=True, text=True,
                          timeout=120, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr
    assert "acme/Honest-GGUF" in proc.stdout and "tsenoH" not in proc.stdout and "Width" not in proc.stdout
    record("hostile inputs refused", 2)


# ---------------------------------------------------------------------------------------------- no hash to check


def test_pull_refuses_a_file_without_a_sha256_unless_allowed_and_then_says_so(hub_server: HubServer,
                                                                               tmp_path: Path) -> None:
    src = write_synthetic_gguf(tmp_path / "src.gguf", n_layers=1)
    hub_server.state.add_repo("acme/NoHash-GGUF", {"n-Q8_0.gguf": src})
    hub_server.state.no_sha.add("n-Q8_0.gguf")

    def pull(*extra: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "app.cli", "pull", "acme/NoHash-GGUF:Q8_0", *extra],
                              capture_output=True, text=True, timeout=120, cwd=ROOT, env={**os.environ, **(env or {})})

    proc = pull("--quiet")
    assert proc.returncode == 1 and "Traceback" not in proc.stderr, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "no sha256" in lines[0] and "allow_unverified_downloads" in lines[0], lines
    assert hub_server.state.served("n-Q8_0.gguf") == 0
    assert not paths.models_dir().exists() or list(paths.models_dir().rglob("*")) == []
    record("hostile inputs refused")

    proc = pull("--quiet", "--json", env={"ROOFLINE_ALLOW_UNVERIFIED_DOWNLOADS": "1"})
    assert proc.returncode == 0, proc.stderr
    assert "warning: not verified: the hub gives no sha256 for n-Q8_0.gguf" in proc.stderr
    import json

    out = json.loads(proc.stdout)
    assert out["verified"] is False and sha256_of(Path(out["path"])) == sha256_of(src)
