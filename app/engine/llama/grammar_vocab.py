"""A loaded model's vocabulary for the grammar engine, and a request's constraint built on it.

The vocabulary (every token's bytes, control tokens marked, the end-of-generation ids) is read from llama.cpp
once per model, on first use (about a second for 262k tokens), and kept as long as the model is; the batch
engine builds it and compiles each request's grammar on its tokenizer thread, so the decode loop never waits
for either. What a constraint is and how the sampler applies it: app.core.sampling.constraint.
"""

from __future__ import annotations

import ctypes
import threading
import weakref
from typing import Any

import llama_cpp

from app.core.sampling.constraint import CONTROL_PREFIX, GrammarSpec, TokenConstraint, TokenVocab

_VOCABS: weakref.WeakKeyDictionary[Any, TokenVocab] = weakref.WeakKeyDictionary()
_LOCK = threading.Lock()
_PIECE_BYTES = 16 * 1024


def token_pieces(vocab: Any, n_vocab: int) -> list[bytes]:
    """Each token's bytes as llama.cpp detokenizes it; control tokens (and user-defined ones that look like
    them, `<...>`) get CONTROL_PREFIX, so a grammar can never spell them out in text."""
    buf = ctypes.create_string_buffer(_PIECE_BYTES + 1)
    pieces = []
    for token in range(n_vocab):
        n = llama_cpp.llama_token_to_piece(vocab, token, buf, _PIECE_BYTES, 0, True)
        piece = buf.raw[:n] if n > 0 else b""
        attr = llama_cpp.llama_token_get_attr(vocab, token)
        if attr & llama_cpp.LLAMA_TOKEN_ATTR_CONTROL or (
                attr & llama_cpp.LLAMA_TOKEN_ATTR_USER_DEFINED and piece.startswith(b"<") and piece.endswith(b">")):
            piece = CONTROL_PREFIX + piece
        pieces.append(piece)
    return pieces


def grammar_vocab(llm: Any) -> TokenVocab:
    """The grammar engine's view of `llm`'s vocabulary, built once per model."""
    with _LOCK:
        found = _VOCABS.get(llm)
        if found is not None:
            return found
        vocab = llm._model.vocab
        n = llm.n_vocab()
        eog = [t for t in range(n) if llama_cpp.llama_vocab_is_eog(vocab, t)]
        bos = llm.token_bos()
        built = TokenVocab(token_pieces(vocab, n), eog, bos if bos >= 0 else None,
                           lambda data: list(llm.tokenize(data, add_bos=False, special=False)))
        _VOCABS[llm] = built
        return built


def constraint_for(llm: Any, grammar: dict[str, str] | None) -> TokenConstraint | None:
    """The request's constraint (None without a grammar); ValueError, in one line, when it cannot compile."""
    if not grammar:
        return None
    return GrammarSpec.from_wire(grammar).constraint(grammar_vocab(llm))
