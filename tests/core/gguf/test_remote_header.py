"""Remote GGUF headers over HTTP range requests: only a prefix crosses the network, facts match the file."""

from __future__ import annotations

from pathlib import Path

import pytest

import synth_gguf
from app.core.gguf import remote_header as remote_gguf
from app.core.gguf.info import inspect_gguf
from app.core.hub import listing as hub
from hubserver import HubServer


def test_header_of_the_real_default_model_from_a_small_prefix(hub_server: HubServer, default_model: Path) -> None:
    hub_server.state.add_repo("google/gemma-3-270m-GGUF", {"gemma-3-270m-Q4_K_M.gguf": default_model})
    rv = hub.list_variants("google/gemma-3-270m-GGUF")
    f = rv.variants[0].first
    got = remote_gguf.fetch_header(rv.repo_id, rv.revision, f)
    local = inspect_gguf(default_model)
    assert got.info is not None
    assert got.info.n_params == local.n_params and got.info.file_type == "Q4_K_M"
    assert got.info.n_layers == local.n_layers and got.info.tensor_bytes == local.tensor_bytes
    served = hub_server.state.served(f.path)
    assert served == got.bytes_fetched
    # The header (vocabulary included) is a few MB of a 253 MB file; we read little more than that.
    assert local.header_size <= served < 2 * local.header_size + (1 << 20)
    assert served < default_model.stat().st_size / 20
    ranges = [r for m, p, r in hub_server.state.requests if p.endswith(f.path)]
    assert ranges and all(r and r.startswith("bytes=") for r in ranges)
    # Second look: from the cache, nothing transferred.
    again = remote_gguf.fetch_header(rv.repo_id, rv.revision, f)
    assert again.cached and again.bytes_fetched == 0 and hub_server.state.served(f.path) == served


def test_split_variant_headers_are_merged(hub_server: HubServer, tmp_path: Path,
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    whole = synth_gguf.write_synthetic_gguf(tmp_path / "whole.gguf", tensor_type="Q8_0", n_layers=3)
    synth_gguf.write_synthetic_gguf(tmp_path / "m-Q8_0.gguf", tensor_type="Q8_0", n_layers=3, split_max_tensors=12)
    parts = sorted(tmp_path.glob("m-Q8_0-*-of-*.gguf"))
    assert len(parts) == 3
    hub_server.state.add_repo("acme/split-GGUF", {p.name: p for p in parts})
    rv = hub.list_variants("acme/split-GGUF")
    (vh,) = remote_gguf.fetch_variant_headers(rv)
    assert vh.error is None and vh.info is not None
    ref = inspect_gguf(whole)
    assert vh.info.n_params == ref.n_params
    assert vh.info.tensor_bytes == ref.tensor_bytes
    assert vh.info.layer_bytes == ref.layer_bytes
    assert vh.variant.size == sum(p.stat().st_size for p in parts)


def test_not_a_gguf_is_a_per_variant_error(hub_server: HubServer, tmp_path: Path) -> None:
    junk = tmp_path / "junk"
    junk.write_bytes(b"<html>not a model</html>" * 100)
    good = synth_gguf.write_synthetic_gguf(tmp_path / "g.gguf", n_layers=1)
    hub_server.state.add_repo("acme/mixed-GGUF", {"m-Q4_0.gguf": junk, "m-Q8_0.gguf": good})
    heads = {h.variant.quant: h for h in remote_gguf.fetch_variant_headers(hub.list_variants("acme/mixed-GGUF"))}
    assert heads["Q4_0"].info is None and heads["Q4_0"].error
    assert heads["Q8_0"].info is not None and heads["Q8_0"].error is None


def test_assessment_badges_on_a_gpu_desktop(hub_server: HubServer, tmp_path: Path) -> None:
    """Remote headers -> recommender on a recorded 8 GB GPU desktop: every badge kind maps to the picker's."""
    from app.core.predict.bandwidth import BandwidthResult
    from app.core.predict.hardware import CPUInfo, GiB, GPUInfo, HardwareInfo
    from app.core.predict.recommend import Machine
    from app.core.predict.speed import default_rates
    from big_gguf import write_header_only

    bw = BandwidthResult(read_gbs=40.0, copy_gbs=30.0, threads=8, buffer_bytes=1 << 28, runs=5, seconds=1.0,
                         measured_at="recorded", gemm_gflops=400.0)
    gpu = GPUInfo("nvidia", "NVIDIA GeForce RTX 3070", 8 * GiB, 8 * GiB - 300 * 2**20, 448.0, "8.6")
    hw = HardwareInfo(CPUInfo("Ryzen", "x86_64", 8, 16, ["AVX2"]), 32 * GiB, 30 * GiB, [gpu], True)
    desktop = Machine(hw, default_rates(hw, bw))
    files = {f"L-{q}.gguf": write_header_only(tmp_path / f"{q}.gguf", q) for q in ("Q2_K", "Q4_K_M", "F16")}
    files["XL-Q8_0.gguf"] = write_header_only(tmp_path / "xl.gguf", "Q8_0", n_layers=80, n_embd=8192,
                                              n_ff=28672, n_head=64, n_head_kv=8)
    hub_server.state.add_repo("acme/mixed-sizes-GGUF", files, fake_sha=True)
    rows = {r.files[0]: r for r in remote_gguf.assess_repo(hub.list_variants("acme/mixed-sizes-GGUF"),
                                                             machine=desktop)}
    assert rows["L-Q2_K.gguf"].verdict == "full GPU"  # 2.9 GB in 8 GB of VRAM
    assert rows["L-F16.gguf"].verdict == "partial" and "layers on GPU" in rows["L-F16.gguf"].note
    assert rows["XL-Q8_0.gguf"].verdict == "won't fit"  # ~70 GB > 32 GB RAM + 8 GB VRAM
    assert rows["L-Q2_K.gguf"].decode_tps > rows["L-F16.gguf"].decode_tps  # type: ignore[operator]
    assert sum(r.recommended for r in rows.values()) == 1
    assert not rows["XL-Q8_0.gguf"].recommended


def test_header_read_through_the_cdn_redirect(hub_server: HubServer, tmp_path: Path) -> None:
    hub_server.state.redirect_lfs = True
    f = synth_gguf.write_synthetic_gguf(tmp_path / "m.gguf", tensor_type="Q8_0", n_layers=12)
    hub_server.state.add_repo("acme/cdn-GGUF", {"m-Q8_0.gguf": f})
    rv = hub.list_variants("acme/cdn-GGUF")
    got = remote_gguf.fetch_header(rv.repo_id, rv.revision, rv.variants[0].first, first=4096)
    assert got.info is not None and got.info.n_params == inspect_gguf(f).n_params
    assert hub_server.state.served("m-Q8_0.gguf") < f.stat().st_size / 4
