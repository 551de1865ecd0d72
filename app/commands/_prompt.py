"""Where a prompt comes from: the command line, standard input (`-`) or a file (`-f FILE`), always as
valid text. Bytes that are not UTF-8 (a Latin-1 file, a mangled terminal) are replaced with U+FFFD and
a note says how many, instead of failing later when the text is encoded for the model."""

from __future__ import annotations

import sys
from pathlib import Path


class PromptError(Exception):
    """The prompt could not be read (missing file, a directory, no prompt at all)."""


def decode_text(data: bytes, where: str) -> str:
    text = data.decode("utf-8", errors="replace")
    bad = text.count("\ufffd") - data.decode("utf-8", errors="ignore").count("\ufffd")
    if bad:
        print(f"roofline: note: {where} is not valid UTF-8; {bad} undecodable byte(s) replaced with \ufffd",
              file=sys.stderr)
    return text


def from_argument(text: str, where: str = "the prompt") -> str:
    """A command-line string: Python keeps undecodable argv bytes as lone surrogates; turn them back into
    bytes and decode them with replacement (printing or encoding a surrogate would raise)."""
    try:
        text.encode("utf-8")
        return text
    except UnicodeEncodeError:
        try:
            data = text.encode("utf-8", "surrogateescape")
        except UnicodeEncodeError:  # a surrogate that no byte produced: keep it as invalid UTF-8
            data = text.encode("utf-8", "surrogatepass")
        return decode_text(data, where)


def read_prompt(arg: str | None, file: str | None) -> str:
    """The prompt from `arg` ("-": standard input) or from `file`; exactly one of them."""
    if arg is not None and file is not None:
        raise PromptError("give the prompt either as an argument or with -f FILE, not both")
    if file is not None:
        path = Path(from_argument(file, "the file name"))
        if path.is_dir():
            raise PromptError(f"{path} is a directory, not a prompt file")
        try:
            return decode_text(path.read_bytes(), str(path))
        except FileNotFoundError:
            raise PromptError(f"prompt file not found: {path}") from None
        except OSError as exc:
            raise PromptError(f"cannot read the prompt file {path}: {exc.strerror or exc}") from None
    if arg == "-":
        stream = getattr(sys.stdin, "buffer", None)  # a text-only stand-in (tests) has no byte buffer
        return decode_text(stream.read(), "standard input") if stream else from_argument(sys.stdin.read())
    if arg is None:
        raise PromptError("no prompt: give it as an argument, '-' to read standard input, or -f FILE")
    return from_argument(arg)
