"""The fill-in-the-middle prompt's layout (app.engine.batch.infill) on a fake vocabulary: llama-server's
repo-level pattern with every FIM token, the plain snippet separator without FIM_SEP, and a refusal that
names the tokens a vocabulary lacks."""

from __future__ import annotations

import pytest

from app.engine import protocol as P
from app.engine.batch import messages as M
from app.engine.batch.infill import FimTokens, Infill, infill_tokens

PRE, SUF, MID, REP, SEP, BOS = 900, 901, 902, 903, 904, 1


def tokenize(text: str) -> list[int]:
    """One token per character: the layout is then readable back."""
    return [ord(c) for c in text]


def spell(tokens: list[int]) -> str:
    names = {PRE: "<PRE>", SUF: "<SUF>", MID: "<MID>", REP: "<REP>", SEP: "<SEP>", BOS: "<BOS>"}
    return "".join(names.get(t, chr(t)) for t in tokens)


REQ = Infill("r", prompt="ret", input_prefix="def f(x):\n    ", input_suffix="\n\nprint(f(2))",
             input_extra=[{"filename": "util.py", "text": "X = 1"}])


def test_repo_level_layout_with_every_fim_token() -> None:
    tokens = infill_tokens(REQ, FimTokens(PRE, SUF, MID, REP, SEP), tokenize, BOS)
    assert spell(tokens) == ("<BOS><REP>myproject\n<SEP>util.py\nX = 1<SEP>filename\n"
                             "<PRE>def f(x):\n    ret<SUF>\n\nprint(f(2))<MID>")


def test_without_repo_and_file_tokens_the_chunks_get_a_plain_separator() -> None:
    tokens = infill_tokens(REQ, FimTokens(PRE, SUF, MID), tokenize, None)
    assert spell(tokens) == ("\n\n--- snippet ---\n\nX = 1<PRE>def f(x):\n    ret<SUF>\n\nprint(f(2))<MID>")


@pytest.mark.parametrize(("fim", "named"), [(FimTokens(), "fim_pre, fim_suf, fim_mid tokens"),
                                            (FimTokens(PRE, -1, MID), "no fim_suf token ")])
def test_a_vocabulary_without_fim_tokens_is_refused_naming_them(fim: FimTokens, named: str) -> None:
    with pytest.raises(ValueError, match=named):
        infill_tokens(REQ, fim, tokenize, BOS)


def test_infill_crosses_the_process_boundary_and_counts_all_its_bytes() -> None:
    back = M.decode(M.encode(Infill("r", prompt="é", sampling=P.Sampling(max_tokens=3), input_prefix="ab",
                                    input_suffix="c", input_extra=[{"filename": "f", "text": "xyz"}])))
    assert isinstance(back, Infill) and back.sampling.max_tokens == 3 and back.input_extra[0]["text"] == "xyz"
    assert back.prompt_bytes() == len("é".encode()) + 2 + 1 + 1 + 3
