"""`frequency_penalty` and `presence_penalty` (OpenAI's) change what `roofline serve` samples: a greedy reply
that repeats itself repeats less with either penalty, a zero penalty changes nothing, and the frequency
penalty grows with each repetition where the presence penalty stays the same. One `roofline serve` with 1
slot on the real default model."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from served import Served, serve

pytestmark = pytest.mark.model

PROMPT = "I like apples. I like apples. I like"  # alone, greedy: " apples. I like apples. I like apples. ..."


@pytest.fixture(scope="module")
def served(default_model: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    with serve(default_model, tmp_path_factory.mktemp("serve-home"), "--parallel", "1", "--ctx", "512") as s:
        yield s


def greedy(served: Served, prompt: str, **penalties: Any) -> str:
    r = served.client().completions.create(model=served.model, prompt=prompt, max_tokens=16, temperature=0,
                                           **penalties)
    return str(r.choices[0].text)


def most_repeated(served: Served, **penalties: Any) -> tuple[int, str]:
    text = greedy(served, PROMPT, **penalties)
    words = text.split()
    return (Counter(words).most_common(1)[0][1] if words else 0), text


def test_frequency_and_presence_penalties_reduce_repetition(served: Served) -> None:
    plain, plain_text = most_repeated(served)
    assert plain >= 4, plain_text  # greedy alone: the same words again and again
    assert most_repeated(served, frequency_penalty=0.0, presence_penalty=0.0)[1] == plain_text
    frequency, frequency_text = most_repeated(served, frequency_penalty=2.0)
    presence, presence_text = most_repeated(served, presence_penalty=2.0)
    assert frequency < plain, frequency_text
    assert presence < plain, presence_text


def test_the_frequency_penalty_grows_with_each_repetition(served: Served) -> None:
    # "one" leads by more than 2 logits however often it came: a presence penalty of 2 leaves the loop, a
    # frequency penalty of 2 × its count breaks it
    prompt = "one two one two one two one two"
    presence = greedy(served, prompt, presence_penalty=2.0)
    frequency = greedy(served, prompt, frequency_penalty=2.0)
    assert frequency.count("one") < presence.count("one"), (frequency, presence)


def test_penalties_out_of_range_are_a_400(served: Served) -> None:
    import openai

    with pytest.raises(openai.BadRequestError) as err:
        served.client().completions.create(model=served.model, prompt="x", max_tokens=1, presence_penalty=3.0)
    assert "presence_penalty" in str(err.value)
