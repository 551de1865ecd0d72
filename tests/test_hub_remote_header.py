"""Remote GGUF headers over HTTP range requests: only a prefix crosses the network, facts match the file."""

from __future__ import annotations

from pathlib import Path

import gguf
import pytest
import synth_gguf
from hubserver import HubServer, hub_server  # noqa: F401 (fixture)

from app.core import hub, remote_gguf
from app.core.gguf_info import inspect_gguf


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

    class SplitWriter(gguf.GGUFWriter):
        def __init__(self, *a, **k):  # type: ignore[no-untyped-def]
            super().__init__(*a, split_max_tensors=12, **k)

    with monkeypatch.context() as m:
        m.setattr(gguf, "GGUFWriter", SplitWriter)
        synth_gguf.write_synthetic_gguf(tmp_path / "m-Q8_0.gguf", tensor_type="Q8_0", n_layers=3)
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
