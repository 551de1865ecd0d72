"""Hub search and variant listing through the real huggingface_hub client against a local hub server."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.core.hub import listing as hub
from connect_log import record_connect_attempts
from hubserver import HubServer, unused_loopback_url
from synth_gguf import write_synthetic_gguf


def _tiny_repo(srv: HubServer, tmp_path: Path) -> dict[str, Path]:
    q8 = write_synthetic_gguf(tmp_path / "q8.gguf", tensor_type="Q8_0")
    q4 = write_synthetic_gguf(tmp_path / "q4.gguf", tensor_type="Q4_0")
    f16 = write_synthetic_gguf(tmp_path / "f16.gguf", tensor_type="F16")
    data = f16.read_bytes()
    half = len(data) // 2
    (tmp_path / "p1").write_bytes(data[:half])
    (tmp_path / "p2").write_bytes(data[half:])
    readme = tmp_path / "README.md"
    readme.write_text("# tiny\n")
    files = {
        "Tiny-Q8_0.gguf": q8,
        "Tiny-Q4_0.gguf": q4,
        "F16/Tiny-F16-00001-of-00002.gguf": tmp_path / "p1",
        "F16/Tiny-F16-00002-of-00002.gguf": tmp_path / "p2",
        "mmproj-Tiny-F16.gguf": q8,
        "README.md": readme,
    }
    srv.state.add_repo("acme/Tiny-GGUF", files, downloads=50, likes=9)
    return files


def test_search_sorts_and_filters(hub_server: HubServer, tmp_path: Path) -> None:
    f = tmp_path / "x.gguf"
    f.write_bytes(b"GGUF")
    st = hub_server.state
    st.add_repo("a/llama-small-GGUF", {"m-Q4_K_M.gguf": f}, downloads=10, likes=99,
                last_modified="2024-01-01T00:00:00.000Z")
    st.add_repo("b/llama-big-GGUF", {"m-Q4_K_M.gguf": f}, downloads=500, likes=1,
                last_modified="2025-06-01T00:00:00.000Z")
    st.add_repo("c/qwen-GGUF", {"m-Q4_K_M.gguf": f}, downloads=1000, likes=5)
    st.add_repo("d/llama-safetensors", {"model.safetensors": f}, downloads=9999, tags=["transformers"])

    by_dl = hub.search("llama", sort="downloads")
    assert [r.repo_id for r in by_dl] == ["b/llama-big-GGUF", "a/llama-small-GGUF"]  # no qwen, no non-gguf
    assert by_dl[0].downloads == 500 and by_dl[1].likes == 99
    assert [r.repo_id for r in hub.search("llama", sort="likes")][0] == "a/llama-small-GGUF"
    assert [r.repo_id for r in hub.search("llama", sort="updated")][0] == "b/llama-big-GGUF"
    # The real client sent the hub's query parameters.
    searches = [p for m, p, _ in st.requests if p.startswith("/api/models?")]
    assert any("filter=gguf" in p and "search=llama" in p and "sort=likes" in p for p in searches)


def test_variants_grouped_with_exact_sizes(hub_server: HubServer, tmp_path: Path) -> None:
    files = _tiny_repo(hub_server, tmp_path)
    rv = hub.list_variants("acme/Tiny-GGUF")
    quants = [v.quant for v in rv.variants]
    assert sorted(quants) == ["F16", "Q4_0", "Q8_0"]  # projector and README left out
    assert quants == ["Q4_0", "Q8_0", "F16"]  # smallest first
    by = {v.quant: v for v in rv.variants}
    assert by["Q8_0"].size == files["Tiny-Q8_0.gguf"].stat().st_size
    f16 = by["F16"]
    assert [f.path for f in f16.files] == ["F16/Tiny-F16-00001-of-00002.gguf", "F16/Tiny-F16-00002-of-00002.gguf"]
    assert f16.size == (tmp_path / "f16.gguf").stat().st_size
    from hubserver import sha256_of

    assert by["Q4_0"].first.sha256 == sha256_of(files["Tiny-Q4_0.gguf"])
    assert len(rv.revision) == 40


def test_incomplete_split_is_not_offered(hub_server: HubServer, tmp_path: Path) -> None:
    f = tmp_path / "x.gguf"
    f.write_bytes(b"GGUF" * 10)
    hub_server.state.add_repo("a/half-GGUF", {"m-Q8_0-00001-of-00003.gguf": f, "m-Q8_0-00002-of-00003.gguf": f,
                                              "m-Q6_K.gguf": f})
    assert [v.quant for v in hub.list_variants("a/half-GGUF").variants] == ["Q6_K"]


def test_missing_repo_is_a_clear_error(hub_server: HubServer) -> None:
    with pytest.raises(hub.HubNotFound, match="nobody/nothing was not found"):
        hub.list_variants("nobody/nothing")


def test_offline_mode_message(hub_server: HubServer, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(hub.HubOffline, match="offline mode"):
        hub.search("llama")
    with pytest.raises(hub.HubOffline):
        hub.list_variants("acme/Tiny-GGUF")
    assert hub_server.state.requests == []  # nothing was sent


def test_unreachable_hub_fails_fast_with_a_message(monkeypatch: pytest.MonkeyPatch) -> None:
    url = unused_loopback_url()
    monkeypatch.setenv("HF_ENDPOINT", url)
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    attempts = record_connect_attempts(monkeypatch)
    with pytest.raises(hub.HubUnreachable, match="cannot reach the model hub") as err:
        hub.search("llama")
    assert url in str(err.value)
    # one quick try, not huggingface_hub's retry loop (which tries again and again for ~23 s)
    assert len(attempts) == 1, attempts
    with pytest.raises(hub.HubUnreachable):
        hub.list_variants("a/b")


def test_plain_http_refused_except_loopback(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_ENDPOINT", "http://hub.example.com")
    with pytest.raises(hub.HubInsecure, match="https"):
        hub.search("x")
    hub.check_url_allowed("https://huggingface.co/x")
    hub.check_url_allowed("http://127.0.0.1:8000/x")
    hub.check_url_allowed("http://[::1]:8000/x")


@pytest.mark.parametrize("name,quant", [
    ("Meta-Llama-3-8B-Instruct-Q4_K_M.gguf", "Q4_K_M"),
    ("gemma-3-270m-it-q8_0.gguf", "Q8_0"),
    ("Qwen3-30B-A3B-BF16-00001-of-00002.gguf", "BF16"),
    ("Phi-4-IQ4_XS.gguf", "IQ4_XS"),
    ("model-IQ2_XXS.gguf", "IQ2_XXS"),
    ("Qwen3-8B-UD-Q4_K_XL.gguf", "UD-Q4_K_XL"),
    ("llama-2-7b.Q5_K_S.gguf", "Q5_K_S"),
    ("mistral-7b-f16.gguf", "F16"),
    ("README.md", None),
])
def test_quant_from_filename(name: str, quant: str | None) -> None:
    assert hub.quant_from_filename(name) == quant


def test_parse_repo_spec() -> None:
    assert hub.parse_repo_spec("org/name:q4_k_m") == ("org/name", "Q4_K_M")
    assert hub.parse_repo_spec("org/name") == ("org/name", None)
    with pytest.raises(ValueError):
        hub.parse_repo_spec("noslash")


def test_cli_search_lists_repos(hub_server: HubServer, tmp_path: Path) -> None:
    import json
    import os
    import subprocess
    import sys

    f = tmp_path / "x.gguf"
    f.write_bytes(b"GGUF")
    hub_server.state.add_repo("a/llama-small-GGUF", {"m-Q4_K_M.gguf": f}, downloads=10)
    root = Path(__file__).resolve().parents[3]
    r = subprocess.run([sys.executable, "-m", "app.cli", "search", "llama", "--json"], cwd=root,
                       env=os.environ.copy(), capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert [x["repo_id"] for x in json.loads(r.stdout)] == ["a/llama-small-GGUF"]
    env = dict(os.environ, HF_ENDPOINT=unused_loopback_url())
    r = subprocess.run([sys.executable, "-m", "app.cli", "search", "llama"], cwd=root, env=env,
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 1 and "cannot reach the model hub" in r.stderr and "Traceback" not in r.stderr


def test_server_speaks_tree_and_paths_info_like_the_hub(hub_server: HubServer, tmp_path: Path) -> None:
    """The stand-in answers the client's other listing endpoints too (used by other huggingface_hub calls)."""
    files = _tiny_repo(hub_server, tmp_path)
    api = hub.api()
    tree = {f.path: f for f in api.list_repo_tree("acme/Tiny-GGUF", recursive=True)}
    assert tree["Tiny-Q8_0.gguf"].size == files["Tiny-Q8_0.gguf"].stat().st_size
    assert tree["Tiny-Q8_0.gguf"].lfs is not None and len(tree["Tiny-Q8_0.gguf"].lfs.sha256) == 64
    (info,) = api.get_paths_info("acme/Tiny-GGUF", ["Tiny-Q4_0.gguf"])
    assert info.size == files["Tiny-Q4_0.gguf"].stat().st_size
    from huggingface_hub import get_hf_file_metadata

    meta = get_hf_file_metadata(hub.resolve_url("acme/Tiny-GGUF", "Tiny-Q4_0.gguf", "main"))
    assert meta.size == files["Tiny-Q4_0.gguf"].stat().st_size and meta.commit_hash and meta.etag
