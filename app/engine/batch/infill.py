"""Fill-in-the-middle (`/infill`, llama-server's shape): the request, and its prompt's token layout.

No llama_cpp here: the batch engine hands `infill_tokens` its vocabulary's FIM tokens and its tokenizer.
The layout is llama-server's (`format_prompt_infill`, the repo-level pattern of Qwen2.5-Coder):

    [BOS] [FIM_REP]myproject\\n [FIM_SEP]name\\n text ... [FIM_SEP]filename\\n
    [FIM_PRE] prefix prompt [FIM_SUF] suffix [FIM_MID]

where the repo and file parts appear only when the vocabulary has those tokens (without FIM_SEP an extra
chunk is preceded by a plain "--- snippet ---" line). Two deliberate differences: the BOS comes first (llama-server
puts the extra chunks before it), and nothing is cut to fit a batch: a prompt over the slot is refused, as on
every other endpoint, rather than losing the start of the prefix silently.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, ClassVar

from app.engine import protocol as P

REQUIRED = ("fim_pre", "fim_suf", "fim_mid")  # without all three a model cannot fill in the middle
SNIPPET = "\n\n--- snippet ---\n\n"


@dataclass
class Infill(P.Generate):
    """A Generate whose prompt is laid out from code around the cursor (`prompt` is typed after the prefix)."""

    type: ClassVar[str] = "infill"
    input_prefix: str = ""
    input_suffix: str = ""
    input_extra: list[dict[str, str]] = field(default_factory=list)  # {"filename", "text"} chunks

    def prompt_bytes(self) -> int:
        parts = [self.input_prefix, self.input_suffix, self.prompt or ""]
        parts += [c.get("text", "") + c.get("filename", "") for c in self.input_extra]
        return sum(len(p.encode("utf-8")) for p in parts)


@dataclass(frozen=True)
class FimTokens:
    """The vocabulary's FIM token ids, -1 where it has none (llama.cpp's LLAMA_TOKEN_NULL)."""

    fim_pre: int = -1
    fim_suf: int = -1
    fim_mid: int = -1
    fim_rep: int = -1
    fim_sep: int = -1

    def missing(self) -> list[str]:
        return [name for name in REQUIRED if getattr(self, name) < 0]


def no_fim_message(missing: list[str]) -> str:
    return (f"This model cannot fill in the middle: its vocabulary has no {', '.join(missing)} token"
            f"{'s' if len(missing) > 1 else ''} (a code model such as Qwen2.5-Coder or CodeGemma has them).")


def infill_tokens(req: Infill, fim: FimTokens, tokenize: Callable[[str], list[int]], bos: int | None) -> list[int]:
    """The prompt's tokens; raises ValueError naming the FIM tokens the vocabulary lacks. `tokenize` turns
    text into tokens without BOS and without parsing special tokens (code may contain their spellings)."""
    missing = fim.missing()
    if missing:
        raise ValueError(no_fim_message(missing))
    out: list[int] = [bos] if bos is not None and bos >= 0 else []
    if fim.fim_rep >= 0:
        out += [fim.fim_rep, *tokenize("myproject\n")]
    for chunk in req.input_extra:
        if fim.fim_sep >= 0:
            out += [fim.fim_sep, *tokenize(chunk.get("filename", "tmp") + "\n")]
        else:
            out += tokenize(SNIPPET)
        out += tokenize(chunk.get("text", ""))
    if fim.fim_sep >= 0:
        out += [fim.fim_sep, *tokenize("filename\n")]
    out += [fim.fim_pre, *tokenize(req.input_prefix), *tokenize(req.prompt or "")]
    out += [fim.fim_suf, *tokenize(req.input_suffix), fim.fim_mid]
    return out


def decode_infill(data: dict[str, Any]) -> Infill:
    """An Infill from its JSON fields (the sampling nested as in Generate)."""
    if isinstance(data.get("sampling"), dict):
        data["sampling"] = P.Sampling(**data["sampling"])
    return Infill(**data)
