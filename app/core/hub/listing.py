"""Hugging Face Hub search and GGUF variant listing, through the real `huggingface_hub` client.

Everything that decides *where* we talk to is read from the environment at call time (HF_ENDPOINT, HF_TOKEN,
HF_HUB_OFFLINE): `huggingface_hub` freezes some of these as module constants at import, which would make a
changed setting (or a test's monkeypatch) silently ignored. Every failure becomes a `HubError` subclass whose
message a user can act on; no traceback reaches the UI or the CLI.
"""

from __future__ import annotations

import os
import re
import threading
import time
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal
from urllib.parse import urlsplit

from app.core.config.network import is_loopback
from app.core.files import untrusted
from app.core.gguf.quant_types import bits_per_weight
from app.core.predict import quality as quant_quality

DEFAULT_ENDPOINT = "https://huggingface.co"
SortKey = Literal["downloads", "likes", "updated"]
_SORT_TO_HUB = {"downloads": "downloads", "likes": "likes", "updated": "last_modified"}


# ---------------------------------------------------------------- errors


class HubError(Exception):
    """A hub operation failed; `str(err)` is a message for the user."""


class HubOffline(HubError):
    """Offline mode is on (HF_HUB_OFFLINE): no request was made."""


class HubUnreachable(HubError):
    """The network or the hub is down, or the endpoint is wrong."""


class HubNotFound(HubError):
    """No such repository / file (or it is private or gated and we have no token for it)."""


class HubInsecure(HubError):
    """The endpoint is plain http and not on this machine: refused."""


# ---------------------------------------------------------------- settings read at call time


def _truthy(value: str | None) -> bool:
    return (value or "").strip().lower() in {"1", "true", "yes", "on"}


def is_offline() -> bool:
    return _truthy(os.environ.get("HF_HUB_OFFLINE")) or _truthy(os.environ.get("TRANSFORMERS_OFFLINE"))


def check_url_allowed(url: str) -> None:
    """Hub traffic is https only; plain http is allowed for loopback (local test servers)."""
    parts = urlsplit(url)
    if parts.scheme == "https":
        return
    if parts.scheme == "http" and is_loopback(parts.hostname):
        return
    raise HubInsecure(f"refusing to talk to {parts.scheme}://{parts.netloc}: hub traffic must use https")


def endpoint() -> str:
    value = (os.environ.get("HF_ENDPOINT") or DEFAULT_ENDPOINT).rstrip("/")
    check_url_allowed(value)
    return value


def token() -> str | None:
    return os.environ.get("HF_TOKEN") or os.environ.get("HUGGING_FACE_HUB_TOKEN") or None


def ensure_online() -> None:
    if is_offline():
        raise HubOffline("offline mode is on (HF_HUB_OFFLINE is set): the hub is not contacted. "
                         "Unset HF_HUB_OFFLINE to search and download; your local models still work.")


_client_lock = threading.Lock()
_client_ready = False


def _install_client_timeouts() -> None:
    """huggingface_hub's shared httpx2 client has no timeout at all: a stalled network would hang forever.

    We keep its request hooks (offline check, request ids), taken from the client its default factory
    builds (public API only: get_session, set_client_factory), and add connect/read timeouts.
    """
    global _client_ready
    with _client_lock:
        if _client_ready:
            return
        import httpx2
        from huggingface_hub import get_session, set_client_factory

        hub_hooks = list(get_session().event_hooks.get("request", []))

        def https_only(request: httpx2.Request) -> None:
            check_url_allowed(str(request.url))  # every request, redirects included

        def factory() -> httpx2.Client:
            return httpx2.Client(
                event_hooks={"request": [https_only, *hub_hooks]},
                follow_redirects=True,
                timeout=httpx2.Timeout(30.0, connect=10.0),
            )

        set_client_factory(factory)
        _client_ready = True


def api() -> Any:
    """An `HfApi` bound to the endpoint and token of the environment *now*."""
    ensure_online()
    _install_client_timeouts()
    from huggingface_hub import HfApi

    return HfApi(endpoint=endpoint(), token=token(), library_name="roofline")


_reach_ok: dict[str, float] = {}


def _preflight(ep: str) -> None:
    """Fail fast when the endpoint is unreachable.

    `list_models` goes through huggingface_hub's retry loop, which sleeps ~23 s on a refused connection
    before giving up; one quick HEAD tells the user at once. A success is remembered for a minute.
    """
    if time.monotonic() - _reach_ok.get(ep, -1e9) < 60:
        return
    import httpx2

    try:
        with httpx2.Client(timeout=httpx2.Timeout(10.0, connect=5.0), follow_redirects=False) as client:
            client.head(ep + "/")
    except httpx2.HTTPError as exc:
        raise HubUnreachable(_unreachable_message(ep, exc)) from exc
    _reach_ok[ep] = time.monotonic()


def _unreachable_message(ep: str, exc: BaseException) -> str:
    return (f"cannot reach the model hub at {ep} ({type(exc).__name__}: {exc}). "
            "Check your network connection, or HF_ENDPOINT if you set it.")


def translate_error(exc: BaseException, what: str) -> HubError:
    """Turn an exception from huggingface_hub / httpx into a `HubError` with a readable message."""
    if isinstance(exc, HubError):
        return exc
    import httpx2
    from huggingface_hub import errors as hf_errors

    ep = os.environ.get("HF_ENDPOINT") or DEFAULT_ENDPOINT
    if isinstance(exc, hf_errors.OfflineModeIsEnabled):
        return HubOffline("offline mode is on (HF_HUB_OFFLINE): the hub is not contacted")
    if isinstance(exc, hf_errors.GatedRepoError):
        return HubNotFound(f"{what} is gated: accept its licence on the hub and set HF_TOKEN")
    if isinstance(exc, (hf_errors.RepositoryNotFoundError, hf_errors.RevisionNotFoundError,
                        hf_errors.RemoteEntryNotFoundError)):
        return HubNotFound(f"{what} was not found on the hub (or it is private: set HF_TOKEN)")
    if isinstance(exc, hf_errors.HfHubHTTPError):
        status = exc.response.status_code if exc.response is not None else "?"
        return HubError(f"the hub answered HTTP {status} for {what}")
    if isinstance(exc, (httpx2.HTTPError, ConnectionError, TimeoutError, OSError)):
        return HubUnreachable(_unreachable_message(ep, exc))
    return HubError(f"{what}: {type(exc).__name__}: {exc}")


# ---------------------------------------------------------------- quantization names in file names

_QUANT_RE = re.compile(
    r"(?<![A-Za-z0-9])(?:UD-)?(I?Q\d(?:_[A-Z0-9]{1,3})*|BF16|F16|F32|MXFP4(?:_MOE)?|TQ\d_\d)(?![A-Za-z0-9])",
    re.IGNORECASE,
)
_SPLIT_RE = re.compile(r"-(\d{5})-of-(\d{5})\.gguf$", re.IGNORECASE)


def quant_from_filename(name: str) -> str | None:
    """'Llama-3-8B-Instruct-Q4_K_M-00001-of-00002.gguf' -> 'Q4_K_M'; the last match wins (names repeat)."""
    base = name.rsplit("/", 1)[-1]
    base = _SPLIT_RE.sub("", base)
    base = re.sub(r"\.gguf$", "", base, flags=re.IGNORECASE)
    found = _QUANT_RE.findall(base)
    if not found:
        return None
    quant = found[-1].upper()
    return "UD-" + quant if re.search(r"UD-" + re.escape(quant), base, re.IGNORECASE) else quant


def split_info(name: str) -> tuple[int, int] | None:
    m = _SPLIT_RE.search(name)
    return (int(m.group(1)), int(m.group(2))) if m else None


def quality_cost(quant: str) -> float | None:
    """Mean KL divergence vs F16 (Llama-3-8B; interpolated for types off the scoreboard), None when unknown."""
    return quant_quality.quality(quant).kld


# ---------------------------------------------------------------- results


@dataclass
class RepoSummary:
    repo_id: str
    downloads: int = 0
    likes: int = 0
    last_modified: datetime | None = None
    tags: list[str] = field(default_factory=list)
    architecture: str | None = None
    context_length: int | None = None
    total_bytes: int | None = None


@dataclass
class HubFile:
    path: str  # path inside the repository
    size: int
    sha256: str | None  # the LFS oid: what the file's bytes hash to


@dataclass
class Variant:
    """One quantization of a model: one file, or several split files (-00001-of-0000N)."""

    quant: str
    files: list[HubFile]

    @property
    def size(self) -> int:
        return sum(f.size for f in self.files)

    @property
    def first(self) -> HubFile:
        return self.files[0]

    @property
    def bits_per_weight(self) -> float | None:
        return bits_per_weight(self.quant)


@dataclass
class RepoVariants:
    repo_id: str
    revision: str  # the commit sha the listing was taken from: downloads pin to it
    variants: list[Variant]
    downloads: int = 0
    likes: int = 0


# ---------------------------------------------------------------- operations


def search(text: str, sort: SortKey = "downloads", limit: int = 30) -> list[RepoSummary]:
    """GGUF repositories whose id contains `text`, most downloaded (liked, recently updated) first."""
    if sort not in _SORT_TO_HUB:
        raise ValueError(f"sort must be one of {sorted(_SORT_TO_HUB)}")
    hub = api()
    _preflight(hub.endpoint)
    try:
        models = list(hub.list_models(
            search=text or None, filter="gguf", sort=_SORT_TO_HUB[sort], limit=limit,
            expand=["downloads", "likes", "lastModified", "tags", "gguf"],
        ))
    except Exception as exc:
        raise translate_error(exc, f"searching for {text!r}") from exc
    results = []
    for m in models:
        if not isinstance(m.id, str) or untrusted.clean_line(m.id) != m.id:
            # A bidi override or a control character in an id makes it read as another repository; the hub
            # itself allows none (and huggingface_hub refuses such an id when it is opened): left out.
            continue
        gguf = getattr(m, "gguf", None) or {}
        results.append(RepoSummary(
            repo_id=m.id, downloads=int(m.downloads or 0), likes=int(m.likes or 0),
            last_modified=m.last_modified, tags=list(m.tags or []),
            architecture=gguf.get("architecture"), context_length=gguf.get("context_length"),
            total_bytes=gguf.get("total"),
        ))
    return results


def _quant_sort_key(v: Variant) -> tuple[float, str]:
    bits = v.bits_per_weight
    return (bits if bits is not None else 99.0, v.quant)


def group_variants(files: list[HubFile]) -> list[Variant]:
    """Group a repo's GGUF files by quantization, keeping split parts together and in order.

    Projector files (mmproj, for vision) and files whose type we cannot tell are left out: they are not
    something one picks as "the model".
    """
    groups: dict[str, list[HubFile]] = {}
    for f in files:
        name = f.path.rsplit("/", 1)[-1]
        if not name.lower().endswith(".gguf") or "mmproj" in name.lower():
            continue
        quant = quant_from_filename(f.path)
        if quant is None:
            continue
        split = split_info(name)
        # One group per (quant, model stem): a repo may hold two models of the same quant.
        stem = _SPLIT_RE.sub("", f.path) if split else f.path
        key = f"{quant}\x00{stem}"
        groups.setdefault(key, []).append(f)
    variants = []
    for key, members in groups.items():
        quant = key.split("\x00", 1)[0]
        members.sort(key=lambda f: split_info(f.path) or (1, 1))
        variants.append(Variant(quant=quant, files=members))
    # Same quant twice (two models in one repo): keep both, sorted.
    variants.sort(key=_quant_sort_key)
    return variants


def complete_split(variant: Variant) -> bool:
    """All parts of a split model are present (a half-uploaded repo is not offered)."""
    parts = [split_info(f.path) for f in variant.files]
    if all(p is None for p in parts) and len(variant.files) == 1:
        return True
    counts = {p[1] for p in parts if p}
    return len(counts) == 1 and sorted(p[0] for p in parts if p) == list(range(1, counts.pop() + 1))


def list_variants(repo_id: str, revision: str | None = None) -> RepoVariants:
    """The repo's GGUF files grouped by quantization, with exact sizes and sha256 from the hub."""
    hub = api()
    try:
        info = hub.model_info(repo_id, revision=revision, files_metadata=True)
    except Exception as exc:
        raise translate_error(exc, repo_id) from exc
    files = []
    for s in info.siblings or []:
        if s.size is None:
            continue
        if not isinstance(s.size, int) or not 0 <= s.size < 1 << 50:
            raise HubError(f"{repo_id} lists {untrusted.clean_line(s.rfilename, 120)!r} with an impossible size")
        try:  # the sha names cache entries and checks downloads: 64 hex digits or the listing is refused
            sha = untrusted.sha256_hex(s.lfs.sha256 if s.lfs else None)
        except ValueError as exc:
            raise HubError(f"{repo_id} lists {untrusted.clean_line(s.rfilename, 120)!r} with an invalid "
                           f"sha256 ({exc}): refusing this repository's listing") from None
        files.append(HubFile(path=s.rfilename, size=int(s.size), sha256=sha))
    variants = [v for v in group_variants(files) if complete_split(v)]
    return RepoVariants(repo_id=repo_id, revision=info.sha or (revision or "main"), variants=variants,
                        downloads=int(info.downloads or 0), likes=int(info.likes or 0))


def resolve_url(repo_id: str, path: str, revision: str) -> str:
    from urllib.parse import quote

    return f"{endpoint()}/{repo_id}/resolve/{quote(revision, safe='')}/{quote(path)}"


def parse_repo_spec(spec: str) -> tuple[str, str | None]:
    """'org/name:Q4_K_M' -> ('org/name', 'Q4_K_M'); 'org/name' -> ('org/name', None)."""
    repo, _, quant = spec.partition(":")
    if repo.count("/") != 1 or not all(repo.split("/")):
        raise ValueError(f"not a repository id (owner/name): {repo!r}")
    return repo, (quant.upper() or None)
