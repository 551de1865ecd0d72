"""Downloads from the local hub: verified, resumable after a dropped connection, refused when unsafe."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from app.core.config import paths
from app.core.hub import downloads
from app.core.hub import listing as hub
from hubserver import HubServer, sha256_of
from synth_gguf import write_synthetic_gguf


@pytest.fixture
def tiny_repo(hub_server: HubServer, tmp_path: Path) -> Path:
    src = write_synthetic_gguf(tmp_path / "src.gguf", tensor_type="F32", n_layers=3)  # ~7 MB
    hub_server.state.add_repo("acme/Tiny-GGUF", {"Tiny-F32.gguf": src, "sub/Tiny-Q8_0.gguf": src})
    return src


def _task(quant: str = "F32") -> downloads.VariantTask:
    rv = hub.list_variants("acme/Tiny-GGUF")
    variant = next(v for v in rv.variants if v.quant == quant)
    return downloads.plan(variant, rv.repo_id, rv.revision, paths.models_dir())


def test_download_verifies_and_moves_into_place(hub_server: HubServer, tiny_repo: Path) -> None:
    task = _task()
    seen: list[float] = []
    out = downloads.download_variant(task, on_progress=lambda p: seen.append(p.fraction))
    assert out == paths.models_dir() / "acme" / "Tiny-GGUF" / "Tiny-F32.gguf"
    assert sha256_of(out) == sha256_of(tiny_repo)
    assert not downloads.part_path(out).exists() and not downloads.sidecar_path(out).exists()
    assert seen and seen[-1] == 1.0 and seen == sorted(seen)
    prov = json.loads(downloads.provenance_path(out).read_text())
    assert prov["repo_id"] == "acme/Tiny-GGUF" and prov["quant"] == "F32" and prov["files"][0]["sha256"]
    assert hub_server.state.served("Tiny-F32.gguf") == tiny_repo.stat().st_size


def test_interrupted_download_resumes_with_the_remainder_only(hub_server: HubServer, tiny_repo: Path) -> None:
    size = tiny_repo.stat().st_size
    cut = size // 3 + 12345
    hub_server.state.drop_after["Tiny-F32.gguf"] = cut
    task = _task()
    with pytest.raises(hub.HubError, match="resumes"):
        downloads.download_variant(task)
    part = downloads.part_path(task.dest)
    assert part.stat().st_size == cut and downloads.sidecar_path(task.dest).exists()
    assert not task.dest.exists()
    assert downloads.pending_downloads(paths.models_dir())[0]["have"] == cut

    progress = downloads.Progress()
    out = downloads.download_variant(_task(), progress=progress)
    assert sha256_of(out) == sha256_of(tiny_repo)
    assert progress.resumed_from == cut
    # The server sent the first third once and then only the rest.
    assert hub_server.state.served("Tiny-F32.gguf") == size
    ranges = [r for m, p, r in hub_server.state.requests if p.endswith("Tiny-F32.gguf") and m == "GET"]
    assert ranges == [None, f"bytes={cut}-"]


def test_checksum_mismatch_deletes_and_says_so(hub_server: HubServer, tiny_repo: Path) -> None:
    hub_server.state.lie_sha.add("Tiny-F32.gguf")
    task = _task()
    with pytest.raises(downloads.ChecksumMismatch, match="does not match.*deleted"):
        downloads.download_variant(task)
    assert not task.dest.exists()
    assert not downloads.part_path(task.dest).exists() and not downloads.sidecar_path(task.dest).exists()


def test_refuses_when_the_disk_is_too_full(hub_server: HubServer, tiny_repo: Path,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    real = shutil.disk_usage

    def tiny_disk(path: object) -> object:
        u = real(path)  # type: ignore[arg-type]
        return type(u)(u.total, u.total - 1000, 1000)

    monkeypatch.setattr(shutil, "disk_usage", tiny_disk)
    task = _task()
    with pytest.raises(downloads.InsufficientDisk, match="not enough disk space"):
        downloads.download_variant(task)
    assert hub_server.state.served("Tiny-F32.gguf") == 0  # refused before any transfer


@pytest.mark.parametrize("bad", ["../evil.gguf", "a/../../evil.gguf", "/etc/passwd", "a\\b.gguf",
                                 ".hidden.gguf", "x\x00.gguf", "C:evil.gguf"])
def test_unsafe_hub_filenames_are_refused(bad: str, tmp_path: Path) -> None:
    with pytest.raises(downloads.UnsafeFilename):
        downloads.destination(tmp_path, "acme/repo", bad)
    with pytest.raises(downloads.UnsafeFilename):
        downloads.destination(tmp_path, "../x", "ok.gguf")


def test_unsafe_name_from_server_never_written(hub_server: HubServer, tmp_path: Path) -> None:
    src = write_synthetic_gguf(tmp_path / "s.gguf", n_layers=1)
    hub_server.state.add_repo("acme/Evil-GGUF", {"../../Evil-Q8_0.gguf": src})
    rv = hub.list_variants("acme/Evil-GGUF")
    with pytest.raises(downloads.UnsafeFilename):
        downloads.plan(rv.variants[0], rv.repo_id, rv.revision, paths.models_dir())
    assert hub_server.state.served("../../Evil-Q8_0.gguf") == 0


def test_manager_queues_pauses_resumes_and_cancels(hub_server: HubServer, tiny_repo: Path) -> None:
    hub_server.state.throttle_bps = 8 << 20  # ~1 s per file: time to pause
    updates: list[str] = []
    mgr = downloads.DownloadManager(on_update=lambda j: updates.append(j.progress.state))
    a = mgr.add(_task("F32"))
    b = mgr.add(_task("Q8_0"))
    assert b.progress.state == "queued"  # one at a time
    import time

    deadline = time.monotonic() + 10
    while a.progress.done < (1 << 20) and time.monotonic() < deadline:
        time.sleep(0.01)
    mgr.pause(a)
    deadline = time.monotonic() + 10
    while a.progress.state != "paused" and time.monotonic() < deadline:
        time.sleep(0.01)
    assert a.progress.state == "paused"
    kept = downloads.part_path(a.task.dest).stat().st_size
    assert 0 < kept < tiny_repo.stat().st_size
    mgr.cancel(b)  # b may be queued or running: either way it ends cancelled, nothing left behind
    mgr.resume(a)
    assert mgr.wait_idle(30)
    mgr.close()
    assert a.progress.state == "done" and a.result is not None and sha256_of(a.result) == sha256_of(tiny_repo)
    assert a.progress.resumed_from == kept
    assert b.progress.state == "cancelled"
    assert not b.task.dest.exists() and not downloads.part_path(b.task.dest).exists()


def test_sha256_from_a_head_request_when_the_listing_has_none(hub_server: HubServer, tiny_repo: Path) -> None:
    task = _task()
    task.files[0].sha256 = None
    out = downloads.download_variant(task)
    assert task.files[0].sha256 == sha256_of(tiny_repo)  # taken from X-Linked-ETag
    heads = [p for m, p, _ in hub_server.state.requests if m == "HEAD" and p.endswith("Tiny-F32.gguf")]
    assert heads and sha256_of(out) == sha256_of(tiny_repo)


def test_head_sha_mismatch_still_rejected(hub_server: HubServer, tiny_repo: Path) -> None:
    hub_server.state.lie_sha.add("Tiny-F32.gguf")
    task = _task()
    task.files[0].sha256 = None
    with pytest.raises(downloads.ChecksumMismatch):
        downloads.download_variant(task)
    assert not task.dest.exists()


def test_a_file_the_hub_gives_no_sha256_for_is_refused_by_default(hub_server: HubServer, tiny_repo: Path) -> None:
    hub_server.state.no_sha.add("Tiny-F32.gguf")
    task = _task()
    assert task.files[0].sha256 is None  # not in the listing; the HEAD's ETag is a git blob id, not a sha256
    with pytest.raises(downloads.UnverifiedDownload, match="no sha256.*allow_unverified_downloads") as err:
        downloads.download_variant(task)
    assert "\n" not in str(err.value) and "ROOFLINE_ALLOW_UNVERIFIED_DOWNLOADS=1" in str(err.value)
    assert [m for m, p, _ in hub_server.state.requests if p.endswith("Tiny-F32.gguf")] == ["HEAD"]  # asked, no GET
    assert hub_server.state.served("Tiny-F32.gguf") == 0
    assert not paths.models_dir().exists() or list(paths.models_dir().rglob("*")) == []


def test_an_allowed_unverified_download_says_it_was_not_verified(hub_server: HubServer, tiny_repo: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    hub_server.state.no_sha.add("Tiny-F32.gguf")
    monkeypatch.setenv("ROOFLINE_ALLOW_UNVERIFIED_DOWNLOADS", "1")
    progress = downloads.Progress()
    out = downloads.download_variant(_task(), progress=progress)
    assert sha256_of(out) == sha256_of(tiny_repo) and progress.state == "done"
    assert progress.message.startswith("not verified: the hub gives no sha256 for Tiny-F32.gguf")
    prov = json.loads(downloads.provenance_path(out).read_text())
    assert prov["verified"] is False and prov["files"][0]["sha256"] is None


def test_the_queue_shows_which_download_was_not_verified(hub_server: HubServer, tiny_repo: Path) -> None:
    from app.core.config import settings as S

    hub_server.state.no_sha.add("Tiny-F32.gguf")
    mgr = downloads.DownloadManager()
    refused = mgr.add(_task("F32"))
    assert mgr.wait_idle(30)
    assert refused.progress.state == "failed" and "allow_unverified_downloads" in refused.progress.message
    s = S.load_settings().settings
    s.allow_unverified_downloads = True  # what the user turns on, in the settings file
    S.save_settings(s)
    unverified = mgr.add(_task("F32"))  # the failed job again, resumed
    verified = mgr.add(_task("Q8_0"))
    assert mgr.wait_idle(30)
    mgr.close()
    assert unverified is refused and unverified.progress.state == "done"
    assert unverified.progress.message.startswith("not verified")
    assert verified.progress.state == "done" and verified.progress.message == ""
    assert json.loads(downloads.provenance_path(verified.task.dest).read_text())["verified"] is True


def test_hf_token_is_sent_to_the_hub(hub_server: HubServer, tiny_repo: Path) -> None:
    downloads.download_variant(_task())
    # Ours: repo info and file traffic (huggingface_hub also fetches /api/agent-harnesses on its own).
    sent = [(r, a) for r, a in zip(hub_server.state.requests, hub_server.state.auth, strict=True)
            if r[1].startswith("/api/models") or "/resolve/" in r[1]]
    assert sent and all(a == "Bearer hf_test_token" for _, a in sent), sent


def test_split_variant_downloads_all_parts_and_lists_as_one(hub_server: HubServer, tmp_path: Path,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    import synth_gguf
    from app.core.gguf.info import inspect_gguf
    from app.core.models import library

    synth_gguf.write_synthetic_gguf(tmp_path / "m-Q8_0.gguf", tensor_type="Q8_0", n_layers=3, split_max_tensors=12)
    whole = synth_gguf.write_synthetic_gguf(tmp_path / "whole.gguf", tensor_type="Q8_0", n_layers=3)
    parts = sorted(tmp_path.glob("m-Q8_0-*-of-*.gguf"))
    hub_server.state.add_repo("acme/Split-GGUF", {f"Q8_0/{p.name}": p for p in parts})
    rv = hub.list_variants("acme/Split-GGUF")
    (variant,) = rv.variants
    out = downloads.download_variant(downloads.plan(variant, rv.repo_id, rv.revision, paths.models_dir()))
    assert out.name == parts[0].name
    for p in parts:
        assert sha256_of(out.parent / p.name) == sha256_of(p)
    (entry,) = [e for e in library.list_models() if e.source == "library"]
    assert entry.path == out and entry.broken is None
    assert entry.size == sum(p.stat().st_size for p in parts)
    assert entry.n_params == inspect_gguf(whole).n_params


def test_adding_a_paused_download_again_resumes_it_not_a_second_writer(hub_server: HubServer,
                                                                       tiny_repo: Path) -> None:
    import time

    hub_server.state.throttle_bps = 4 << 20
    mgr = downloads.DownloadManager()
    a = mgr.add(_task())
    deadline = time.monotonic() + 10
    while a.progress.done < (1 << 20) and time.monotonic() < deadline:
        time.sleep(0.01)
    mgr.pause(a)
    while a.progress.state != "paused" and time.monotonic() < deadline:
        time.sleep(0.01)
    hub_server.state.throttle_bps = None
    again = mgr.add(_task())
    assert again is a and len(mgr.jobs) == 1
    assert mgr.wait_idle(30)
    mgr.close()
    assert a.progress.state == "done" and sha256_of(a.task.dest) == sha256_of(tiny_repo)


def test_follows_the_hubs_cdn_redirect_with_range_intact(hub_server: HubServer, tiny_repo: Path) -> None:
    hub_server.state.redirect_lfs = True
    size = tiny_repo.stat().st_size
    hub_server.state.drop_after["Tiny-F32.gguf"] = size // 2
    task = _task()
    task.files[0].sha256 = None  # taken from the 302's X-Linked-ETag
    with pytest.raises(hub.HubError):
        downloads.download_variant(task)
    out = downloads.download_variant(_task())
    assert sha256_of(out) == sha256_of(tiny_repo) and hub_server.state.served("Tiny-F32.gguf") == size
    cdn = [(m, r) for m, p, r in hub_server.state.requests if p.startswith("/cdn/")]
    assert ("GET", f"bytes={size // 2}-") in cdn  # the Range survived the redirect
