"""The reliability summary can show a loss: a planted loss of one message is counted as 1, printed in the
summary, and fails its test. Run in a pytest sub-process so the planted loss never reaches this run's own
summary."""

from __future__ import annotations

from pathlib import Path

import pytest

from reliability_plugin import LossTally

HELPERS = Path(__file__).resolve().parents[1] / "helpers"

PLANTED = '''
from app.core.chat.store import ChatStore
from reliability_plugin import counting_losses


def test_a_store_that_dropped_one_message(tmp_path):
    store = ChatStore(tmp_path / "chats.sqlite3")
    conv = store.create_conversation("c")
    committed = {}
    for role, text in [("user", "one"), ("assistant", "two"), ("user", "three")]:
        m = store.add_message(conv.id, role, text)
        committed[m.id] = (role, text, "complete")
    store.delete_messages_from(conv.id, max(committed))  # the planted loss: the last message is gone
    found = {m.id: (m.role, m.content, m.state) for m in store.messages(conv.id)}
    with counting_losses() as losses:
        losses.check(committed, found)
'''


def test_a_planted_loss_is_counted_reported_and_fails(pytester: pytest.Pytester) -> None:
    pytester.makeconftest(f"import sys\nsys.path.insert(0, {str(HELPERS)!r})\n"
                          "pytest_plugins = ['reliability_plugin']\n")
    pytester.makepyfile(test_planted=PLANTED)
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*1 committed message(s) lost or changed*"])  # the test failed on it
    result.stdout.fnmatch_lines(["*messages checked after kills = 3, messages lost = 1*"])  # and it shows


def test_the_tally_counts_missing_and_changed_messages() -> None:
    tally = LossTally()
    committed = {1: ("user", "a", "complete"), 2: ("assistant", "b", "interrupted")}
    assert tally.check(committed, dict(committed)) == 0
    with pytest.raises(AssertionError):
        tally.check(committed, {1: committed[1], 2: ("assistant", "b!", "interrupted")})  # changed
    assert tally.lost == 1
    with pytest.raises(AssertionError):
        tally.check(committed, {})  # both gone
    assert (tally.lost, tally.checked) == (2, 2)
