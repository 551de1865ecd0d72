"""The batch engine's bounded tokenizing (app.engine.llama.batch.tokenizer) with a stand-in tokenizer: a
prompt far over the slot costs about what a full slot's prompt costs, never its own length; a prompt that
fits is tokenized whole, once more than its chunks."""

from __future__ import annotations

from app.engine.llama.batch.tokenizer import bounded_tokenize, prefix_cut


class Words:
    """One token per word (a space-separated piece), counting the bytes it was asked to tokenize."""

    def __init__(self) -> None:
        self.bytes_read = 0

    def __call__(self, data: bytes) -> list[int]:
        self.bytes_read += len(data)
        return [len(w) for w in data.split(b" ") if w]


def test_a_huge_prompt_is_refused_after_reading_a_bounded_prefix() -> None:
    words = Words()
    huge = b"hello world " * 2_700_000  # 32 MB
    assert bounded_tokenize(words, huge, limit=2048) is None
    assert words.bytes_read < 2048 * 16 * 2  # a few chunks of the slot's size, not 32 MB


def test_a_prompt_that_fits_is_tokenized_whole() -> None:
    words = Words()
    text = b"hello world " * 3000  # 6000 tokens, 36 kB: past the first chunk, under the limit
    assert bounded_tokenize(words, text, limit=8192) == [5, 5] * 3000
    assert words.bytes_read < 3 * len(text)
    assert bounded_tokenize(Words(), text, limit=6000) is None  # exactly the slot: no room for a reply


def test_chunks_end_at_a_space_or_a_whole_character() -> None:
    assert prefix_cut(b"abc def ghi", 9) == 7
    assert prefix_cut(b"abc", 10) == 3
    text = "é".encode() * 100  # no space: the cut keeps characters whole
    cut = prefix_cut(text, 51)
    assert cut == 50 and text[:cut].decode()
