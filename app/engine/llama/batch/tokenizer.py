"""The batch engine's prompt tokenizer: a thread beside the decode loop, bounded by what a slot can hold.

Tokenizing (and templating) a prompt took the engine's main loop while it ran, so one huge prompt froze
every other stream. Here a prompt is refused before any tokenizing when its UTF-8 length already exceeds
what a slot can hold (`max_prompt_bytes`: the slot's tokens × the longest token's bytes in the vocabulary,
learnt on this thread once the model is loaded); otherwise it is tokenized on this thread in growing
chunks, refused as soon as a chunk alone is over the slot, and only a prompt that fits is tokenized whole.
llama.cpp's tokenizer reads the vocabulary only (llama-server tokenizes on its HTTP threads too), and the
ctypes calls release the GIL, so the main thread keeps decoding meanwhile. Results go back to the engine's
inbox as `Prepared`, where the main loop admits them between two steps.
"""

from __future__ import annotations

import ctypes
import queue
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import llama_cpp

from app.engine import protocol as P
from app.engine.batch.infill import FimTokens, Infill, infill_tokens

FIRST_CHUNK_TOKENS = 4  # bytes per slot token in the first chunk tried: most text is 3-5 bytes a token


@dataclass
class Prepared:
    """A Generate's prompt: its tokens, or why not (`over`: more than the slot holds; `error`: one line)."""

    request: P.Generate
    tokens: list[int] | None
    over: bool = False
    error: str | None = None
    constraint: Any = None  # the request's compiled grammar (app.core.sampling.constraint), if it has one

    @property
    def request_id(self) -> str:  # the engine answers a failure while admitting it to this id
        return self.request.request_id


def max_token_bytes(vocab: Any, n_vocab: int) -> int:
    """The longest text any single token stands for, special tokens included (at least 1)."""
    size = 1024
    buf = ctypes.create_string_buffer(size)
    longest = 1
    for token in range(n_vocab):
        n = llama_cpp.llama_token_to_piece(vocab, token, buf, size, 0, True)
        longest = max(longest, n if n >= 0 else -n)
    return longest


def prefix_cut(data: bytes, limit: int) -> int:
    """Where to cut `data` at most `limit` bytes in: after the last space or newline before it, else on a
    UTF-8 character boundary, so the chunk ends as the whole text would tokenize there."""
    if limit >= len(data):
        return len(data)
    space = max(data.rfind(b" ", 0, limit), data.rfind(b"\n", 0, limit))
    if space > limit // 2:
        return space
    cut = limit
    while cut > 0 and data[cut] & 0xC0 == 0x80:
        cut -= 1
    return cut


def too_long(n_tokens: int, limit: int, whole: bool) -> bool:
    # a chunk cut after a space may end in one token the whole text would merge into the next word
    return n_tokens >= limit if whole else n_tokens > limit + 1


def bounded_tokenize(tokenize: Callable[[bytes], list[int]], data: bytes, limit: int) -> list[int] | None:
    """`data`'s tokens, or None as soon as a chunk of it shows it is `limit` tokens or more: the work spent
    on a prompt over the slot stays about what tokenizing a prompt that fills it costs."""
    size = max(64, limit * FIRST_CHUNK_TOKENS)
    while size < len(data):
        cut = prefix_cut(data, size)
        if too_long(len(tokenize(data[:cut])), limit, whole=False):
            return None
        size *= 4
    tokens = tokenize(data)
    return None if too_long(len(tokens), limit, whole=True) else tokens


def fim_tokens(vocab: Any) -> FimTokens:
    """The vocabulary's fill-in-the-middle tokens (-1 for each it lacks)."""
    return FimTokens(*(int(getattr(llama_cpp, f"llama_vocab_{name}")(vocab))
                       for name in ("fim_pre", "fim_suf", "fim_mid", "fim_rep", "fim_sep")))


def infill_prompt(llm: Any, req: Infill) -> list[int]:
    """An Infill's prompt tokens for the loaded model (ValueError naming missing FIM tokens)."""
    bos = llm.token_bos() if llm._model.add_bos_token() else None
    return infill_tokens(req, fim_tokens(llm._model.vocab),
                         lambda text: list(llm.tokenize(text.encode("utf-8"), add_bos=False, special=False))
                         if text else [], bos)


class PromptTokenizer:
    """One thread that turns Generate commands into `Prepared` results on the engine's inbox.

    `text_of(request)` gives the prompt's bytes, whether its special tokens are parsed (chat) and whether
    a BOS is added; it runs on this thread too (a chat template's rendering); `tokenize(data, special,
    add_bos)` is llama.cpp's; `constrain(request)` compiles a request's grammar (ValueError: it cannot), here
    too, since a large schema takes milliseconds and the model's first one builds the vocabulary;
    `infill_of(request)` lays out an Infill's tokens whole (its byte length, already bounded, keeps that
    cheap). `lock` is held while a job runs: the engine takes it to load or unload the model under no job."""

    def __init__(self, inbox: queue.Queue[Any], text_of: Callable[[P.Generate], tuple[bytes, bool, bool]],
                 tokenize: Callable[[bytes, bool, bool], list[int]],
                 constrain: Callable[[P.Generate], Any] | None = None,
                 infill_of: Callable[[Infill], list[int]] | None = None) -> None:
        self.inbox = inbox
        self.text_of = text_of
        self.tokenize = tokenize
        self.constrain = constrain
        self.infill_of = infill_of
        self.lock = threading.RLock()  # load() unloads first, under the same lock
        self.jobs: queue.Queue[Callable[[], None] | None] = queue.Queue()
        self.max_prompt_bytes = 0  # 0 until the vocabulary's longest token is known
        threading.Thread(target=self._run, name="tokenizer", daemon=True).start()

    def submit(self, request: P.Generate, limit_tokens: int) -> None:
        self.jobs.put(lambda: self.inbox.put(self._prepare(request, limit_tokens)))

    def learn_limits(self, vocab: Any, n_vocab: int, n_ctx_slot: int, done: Callable[[], None]) -> None:
        """Measure the longest token on this thread (about a second for a 256k vocabulary), then `done()`."""
        self.max_prompt_bytes = 0

        def measure() -> None:
            self.max_prompt_bytes = n_ctx_slot * max_token_bytes(vocab, n_vocab)
            done()
        self.jobs.put(measure)

    def forget(self) -> None:
        """Drop the jobs not started (the model is going away): call with `lock` held."""
        while True:
            try:
                self.jobs.get_nowait()
            except queue.Empty:
                return

    def stop(self) -> None:
        self.jobs.put(None)

    def _run(self) -> None:
        while True:
            job = self.jobs.get()
            if job is None:
                return
            with self.lock:
                job()

    def _prepare(self, request: P.Generate, limit: int) -> Prepared:
        try:
            if isinstance(request, Infill) and self.infill_of is not None:
                tokens: list[int] | None = self.infill_of(request)
                tokens = None if tokens is not None and too_long(len(tokens), limit, whole=True) else tokens
            else:
                data, special, add_bos = self.text_of(request)
                tokens = bounded_tokenize(lambda b: self.tokenize(b, special, add_bos), data, limit)
            constraint = self.constrain(request) if tokens and request.grammar and self.constrain else None
        except Exception as exc:  # noqa: BLE001 - a template that fails is this request's error, not the thread's
            return Prepared(request, None, error=f"{exc}" if isinstance(exc, ValueError)
                            else f"{type(exc).__name__}: {exc}")
        if tokens is None:
            return Prepared(request, None, over=True)
        if not tokens:
            return Prepared(request, None, error="The prompt is empty.")
        return Prepared(request, tokens, constraint=constraint)
