"""Read GGUF headers on the hub with HTTP range requests: fit and speed before downloading gigabytes.

The header (metadata + tensor table) is at the start of the file: we fetch the first megabyte and, when the
parser says the header goes on, only the missing bytes after it (`gguf_info.read_header_bytes`). Headers are
cached in cache_dir()/remote-headers under a hash of endpoint, repo, revision, path, size and sha256 (never a
name the hub chose), so reopening a repo costs nothing. A header larger than `max_remote_header_mib` is refused.
A split model's parts each carry their own tensor table: all parts' headers are read and merged.

`assess_repo` runs the recommender on every variant of a repo and returns what the picker shows: verdict,
max context, predicted prefill/decode speed, quality cost, and which variant is recommended.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from app.core.config import paths
from app.core.files import atomic_write, untrusted
from app.core.gguf.info import (
    GGUFError,
    GGUFInfo,
    TensorInfo,
    inspect_gguf_bytes,
    parse_header,
    read_header_bytes,
)
from app.core.gguf.split import merge_split
from app.core.hub import listing as hub

FIRST_READ = 1 << 20  # most headers are 1-8 MB (the vocabulary); grow from here only as needed


@dataclass
class RemoteHeader:
    info: GGUFInfo | None  # None for a split model's later parts (no model metadata there)
    tensors: list[TensorInfo]
    bytes_fetched: int  # over the network this time (0 when cached)
    cached: bool


def _cache_path(repo_id: str, revision: str, f: hub.HubFile) -> Path:
    # Every part of the key comes from the hub: hash them all, so no listing can name a path (a "sha256" of
    # `../../x` once wrote outside the cache) and no repo can claim another repo's cached header.
    key = untrusted.cache_key(hub.endpoint(), repo_id, revision, f.path, f.size, f.sha256 or "")
    d = paths.cache_dir() / "remote-headers"
    d.mkdir(parents=True, exist_ok=True)
    return d / f"{key}.bin"


def header_limit() -> int:
    """The most bytes one remote header may take (settings: max_remote_header_mib, 64 MiB by default)."""
    from app.core.config.settings import load_settings

    return int(load_settings(move_aside=False).settings.max_remote_header_mib) << 20


def fetch_header(repo_id: str, revision: str, f: hub.HubFile, client: Any = None,
                 first: int = FIRST_READ, limit: int | None = None) -> RemoteHeader:
    """The GGUF facts of one hub file from its first bytes. Raises `hub.HubError` or `GGUFError`.

    At most `limit` bytes (default `header_limit()`) are fetched: a header that needs more is refused.
    """
    limit = header_limit() if limit is None else limit
    cache = _cache_path(repo_id, revision, f)
    if cache.exists():
        try:
            return _header(cache.read_bytes(), f, 0, True)
        except GGUFError:
            cache.unlink(missing_ok=True)  # stale or damaged: fetch again
    import httpx2

    from app.core.hub.downloads import http_client

    own = client is None
    client = client or http_client()
    url = hub.resolve_url(repo_id, f.path, revision)
    from huggingface_hub.utils import build_hf_headers

    headers = build_hf_headers(token=hub.token(), library_name="roofline")
    headers["Accept-Encoding"] = "identity"
    buf = bytearray()
    fetched = 0

    def read_at(n: int) -> bytes:
        """The first n bytes, asking the server only for what we do not have yet."""
        nonlocal fetched
        if n > limit:
            raise GGUFError(f"the header of {untrusted.clean_line(f.path, 120)} needs more than {limit >> 20} MiB "
                            "(max_remote_header_mib in settings): not fetched")
        if n > len(buf):
            h = dict(headers, Range=f"bytes={len(buf)}-{n - 1}")
            with client.stream("GET", url, headers=h) as resp:
                if resp.status_code not in (200, 206):
                    raise hub.HubError(f"the hub answered HTTP {resp.status_code} for {f.path}")
                if resp.status_code == 200 and buf:
                    buf.clear()  # server ignored Range and sent the file from its start
                for chunk in resp.iter_bytes():
                    need = n - len(buf)
                    buf.extend(chunk[:need])
                    fetched += len(chunk)
                    if len(buf) >= n:
                        break  # a server that ignored Range would send the whole file: stop reading
        return bytes(buf[:n])

    try:
        data = read_header_bytes(read_at, f.size, first=first)
    except httpx2.HTTPError as exc:
        raise hub.HubUnreachable(f"could not read the header of {f.path}: {type(exc).__name__}: {exc}") from exc
    finally:
        if own:
            client.close()
    result = _header(data, f, fetched, False)
    atomic_write.write_bytes(cache, data[: parse_header(data, f.size).header_size])
    return result


def _header(data: bytes, f: hub.HubFile, fetched: int, cached: bool) -> RemoteHeader:
    split = hub.split_info(f.path)
    if split and split[0] > 1:
        return RemoteHeader(None, parse_header(data, f.size).tensors, fetched, cached)
    info = inspect_gguf_bytes(data, f.size, path=f.path)
    return RemoteHeader(info, info.tensors, fetched, cached)


@dataclass
class VariantHeader:
    variant: hub.Variant
    info: GGUFInfo | None
    error: str | None = None
    bytes_fetched: int = 0


def fetch_variant_headers(rv: hub.RepoVariants, max_workers: int = 4) -> list[VariantHeader]:
    """Headers of every variant (all parts of split ones), a few in parallel; failures are per variant."""
    from app.core.hub.downloads import http_client

    client = http_client()

    def one(v: hub.Variant) -> VariantHeader:
        try:
            parts = [fetch_header(rv.repo_id, rv.revision, f, client) for f in v.files]
        except (hub.HubError, GGUFError) as exc:
            return VariantHeader(v, None, str(exc))
        first = parts[0].info
        if first is None:
            return VariantHeader(v, None, "the first part has no model metadata")
        merged = merge_split(first, [p.tensors for p in parts[1:]])
        return VariantHeader(v, merged, None, sum(p.bytes_fetched for p in parts))

    try:
        with ThreadPoolExecutor(max_workers=max_workers) as pool:
            return list(pool.map(one, rv.variants))
    finally:
        client.close()


# ---------------------------------------------------------------- what the picker shows


@dataclass
class VariantAssessment:
    quant: str
    size: int
    files: list[str]
    verdict: str = "unknown"  # "full GPU" | "partial" | "CPU" | "won't fit" | "unknown"
    max_context: int | None = None
    prefill_tps: float | None = None
    decode_tps: float | None = None
    quality_kld: float | None = None  # mean KL divergence vs F16 (a guide)
    bits_per_weight: float | None = None
    recommended: bool = False
    error: str | None = None
    note: str = ""
    detail: dict[str, Any] = field(default_factory=dict)


_VERDICT = {"full GPU": "full GPU", "partial GPU": "partial", "CPU only": "CPU", "does not fit": "won't fit"}
_machine: tuple[float, Any] | None = None
MACHINE_TTL_S = 300.0  # re-read now and then: free memory changes, and a calibration may have been stored


def this_machine() -> Any:
    """The recommender's view of this computer (bandwidth is cached on disk by app.core.predict.bandwidth)."""
    global _machine
    import time

    now = time.monotonic()
    if _machine is None or now - _machine[0] > MACHINE_TTL_S:
        from app.core.predict.recommend import Machine

        _machine = (now, Machine.from_system())
    return _machine[1]


def assess_repo(rv: hub.RepoVariants, headers: list[VariantHeader] | None = None, machine: Any = None,
                n_ctx: int | None = None) -> list[VariantAssessment]:
    """What the picker shows for each variant of a repo, predicted for this machine by the recommender.

    The recommended row carries the recommender's one-sentence reason in `detail["sentence"]`.
    """
    from app.core.predict.recommend import Candidate, recommend

    headers = headers if headers is not None else fetch_variant_headers(rv)
    rows = []
    for h in headers:
        v = h.variant
        rows.append(VariantAssessment(
            quant=v.quant, size=v.size, files=[f.path for f in v.files], error=h.error,
            quality_kld=hub.quality_cost(v.quant),
            bits_per_weight=(8 * h.info.tensor_bytes / h.info.n_params) if h.info and h.info.n_params else None,
            detail={"bytes_fetched": h.bytes_fetched},
        ))
    readable = [(row, h) for row, h in zip(rows, headers, strict=True) if h.info is not None]
    if not readable:
        return rows
    machine = machine or this_machine()
    rec = recommend([Candidate(h.info, name=row.quant, size=row.size) for row, h in readable  # type: ignore[arg-type]
                     ], machine, n_ctx=n_ctx)
    for (row, _h), report in zip(readable, rec.variants, strict=True):
        row.verdict = _VERDICT.get(report.verdict, report.verdict)
        row.max_context = report.max_ctx.get("f16") or None
        if report.verdict != "does not fit":
            row.prefill_tps = report.prefill_tps or None
            row.decode_tps = report.decode_tps or None
        notes = []
        if report.verdict == "does not fit" and report.memory is not None:
            from app.core.metrics.phase import fmt_bytes

            notes.append(f"needs ≈{fmt_bytes(report.memory.total)}, {fmt_bytes(rec.budget.ram)} RAM usable")
        if report.verdict == "partial GPU":
            notes.append(f"{report.n_gpu_layers}/{report.n_layers + 1} layers on GPU")
        if report.speed_label:
            notes.append(report.speed_label)
        if report.quality.grade not in ("", "unknown"):
            notes.append(f"quality loss {report.quality.grade}")
        row.note = ", ".join(notes)
        row.recommended = report.recommended
        row.detail.update(n_gpu_layers=report.n_gpu_layers, max_ctx=report.max_ctx, quality=report.quality.describe())
        if report.recommended:
            row.detail["sentence"] = rec.sentence
    return rows
