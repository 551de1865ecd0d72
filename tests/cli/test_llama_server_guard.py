"""The live llama-server test's lookup (tests/helpers/llama_tools.py): where .ci/run built llama-server and set
ROOFLINE_REQUIRE_LLAMA_SERVER=1, a missing one fails the test instead of skipping it; elsewhere it skips. Nothing
is built: the lookup runs against an empty cache folder and a PATH without llama-server."""

from __future__ import annotations

from pathlib import Path

import pytest

from llama_tools import GIVEN, REQUIRE, llama_server_bin, require_llama_server


@pytest.fixture
def nowhere(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """No llama-server anywhere the lookup looks: an empty cache, an empty PATH, none given."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.setenv("PATH", str(tmp_path / "bin"))
    monkeypatch.delenv(GIVEN, raising=False)
    monkeypatch.delenv(REQUIRE, raising=False)
    return tmp_path


def _outcome() -> BaseException:
    # pytest's skip and fail are BaseExceptions: caught as such, so that a skip where a failure is due fails here
    with pytest.raises(BaseException) as info:
        require_llama_server()
    return info.value


def test_a_missing_llama_server_fails_where_it_is_required(nowhere: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(REQUIRE, "1")
    outcome = _outcome()
    assert isinstance(outcome, pytest.fail.Exception), type(outcome)
    assert "llama-server is not built" in str(outcome) and f"{REQUIRE}=1 requires it" in str(outcome)


def test_a_missing_llama_server_skips_elsewhere(nowhere: Path) -> None:
    outcome = _outcome()
    assert isinstance(outcome, pytest.skip.Exception), type(outcome)


def test_a_given_path_that_is_not_there_fails_where_required(nowhere: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(REQUIRE, "1")
    monkeypatch.setenv(GIVEN, str(nowhere / "build" / "llama-server"))
    outcome = _outcome()
    assert isinstance(outcome, pytest.fail.Exception) and "llama-server is not at" in str(outcome)


def test_the_built_one_is_found_in_the_cache(nowhere: Path) -> None:
    binary = nowhere / "cache" / "roofline-build" / "llama-tools-0123456789abcdef" / "bin" / "llama-server"
    binary.parent.mkdir(parents=True)
    binary.write_text("#!/bin/sh\n")
    binary.chmod(0o755)
    assert llama_server_bin() == binary == require_llama_server()
