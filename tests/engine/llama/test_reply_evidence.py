"""The engine records what the machine did during each reply (Done.metrics["evidence"]) on the real default
model; a mapped model whose pages were evicted from the engine (tests/helpers/page_out.py: process_madvise
MADV_PAGEOUT, as memory pressure would; posix_fadvise DONTNEED and drop_caches leave mapped pages alone) is
read from storage during the next reply, and the slowness line names it. So it is when a real memory hog takes
the RAM the mapped model was in (both in a memory cgroup of the test's own, tests/helpers/memory_cgroup.py:
the machine outside it never feels the pressure). Counters only: no assertion reads a time."""

from __future__ import annotations

import contextlib
import os
import shutil
import sys
from pathlib import Path

import pytest

from app.core.metrics.evidence import Evidence
from app.core.metrics.slowness import MAJOR_FAULTS, READ_BYTES, causes
from app.engine import protocol as P
from app.engine.client import EngineClient
from engine_helpers import collect
from memory_cgroup import memory_cgroup
from page_out import page_out

pytestmark = pytest.mark.model


def _request(rid: str) -> P.Generate:
    return P.Generate(request_id=rid, messages=[{"role": "user", "content": "Count to twenty."}],
                      sampling=P.Sampling(temperature=0.0, max_tokens=12, seed=1, ignore_eos=True))


def test_each_reply_carries_its_evidence(default_model: Path) -> None:
    with EngineClient() as client:
        client.load(P.LoadConfig(model_path=str(default_model), n_ctx=512, n_threads=2))
        _tokens, done = collect(client, _request("e1"))
    ev = Evidence.from_dict(done.metrics["evidence"])
    assert ev.threads == 2 and ev.wall_s > 0 and ev.n_cpus >= 1
    assert ev.engine_cores is not None and ev.engine_cores > 0  # the engine's own CPU time, apart from others'
    assert ev.other_cores is not None and ev.other_cores >= 0
    assert ev.gpu_layers_planned == 0
    assert ev.model_bytes > 0 and ev.disk_read_bytes is not None


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="process_madvise is Linux-only")
def test_a_mapped_model_paged_in_during_the_reply_is_named(default_model: Path, tmp_path: Path) -> None:
    model = tmp_path / "mapped.gguf"  # its own copy: the shared model's pages stay where they are
    shutil.copyfile(default_model, model)
    with open(model, "rb+") as f:
        os.fsync(f.fileno())  # written pages are dirty until then, and a dirty page is not paged out
    with EngineClient() as client:
        client.load(P.LoadConfig(model_path=str(model), n_ctx=512, n_threads=2, use_mmap=True))
        client.stats()  # answered after the warm-up decode that follows Loaded (it would page the weights in)
        assert client.pid is not None
        try:
            evicted = page_out(client.pid, str(model))
        except OSError as exc:  # not root and no CAP_SYS_NICE, or a kernel before 5.10
            pytest.skip(f"cannot page the engine's mapping out here: {exc}")
        assert evicted >= default_model.stat().st_size // 2
        _tokens, done = collect(client, _request("p1"))
        _tokens, again = collect(client, _request("p2"))
    first, second = Evidence.from_dict(done.metrics["evidence"]), Evidence.from_dict(again.metrics["evidence"])
    # the weights llama.cpp does not repack stay in the mapping (the tied Q6_K embedding, read for the logits
    # of every token): read again from storage
    assert first.disk_read_bytes is not None and first.disk_read_bytes >= READ_BYTES
    assert any(c.line.startswith("weights paged in from the mapped model file") for c in causes(first))
    assert (second.disk_read_bytes or 0) < first.disk_read_bytes // 4  # cached now


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="memory cgroups are Linux's")
def test_a_memory_hog_that_takes_the_mapped_models_ram_is_named(default_model: Path, tmp_path: Path) -> None:
    model = tmp_path / "squeezed.gguf"
    shutil.copyfile(default_model, model)
    with open(model, "rb") as f:  # written pages are dirty until fsync; then out of the page cache, so the
        os.fsync(f.fileno())  # engine's own reads bring (and charge) them into its cgroup
        os.posix_fadvise(f.fileno(), 0, 0, os.POSIX_FADV_DONTNEED)
    with contextlib.ExitStack() as stack:
        try:
            group = stack.enter_context(memory_cgroup())
        except OSError as exc:
            pytest.skip(f"no memory cgroup of our own here (not root, or /sys/fs/cgroup read-only): {exc}")
        client = stack.enter_context(EngineClient())
        client.start()
        assert client.pid is not None
        group.add(client.pid)  # before the load: the mapped model's pages are charged to the cgroup
        client.load(P.LoadConfig(model_path=str(model), n_ctx=512, n_threads=2, use_mmap=True))
        client.stats()  # after the warm-up decode
        cached = group.file_bytes()
        assert cached >= default_model.stat().st_size // 2  # the mapped model is in the cgroup's RAM
        headroom = 32 << 20
        group.set_limit(group.usage() + headroom)
        with group.hog(headroom + int(cached * 0.8)):  # the RAM of four fifths of the model taken
            _tokens, done = collect(client, _request("h1"))
    ev = Evidence.from_dict(done.metrics["evidence"])
    assert (ev.major_faults or 0) >= MAJOR_FAULTS or (ev.disk_read_bytes or 0) >= READ_BYTES
    # named among the causes (another process's CPU load on a busy machine may be stronger)
    assert any(c.line.startswith("weights paged in from the mapped model file") for c in causes(ev))
