"""Counters of the reliability suite (tests/reliability/), printed as one summary at the end of the run (with
pytest-xdist, each worker's counts are added up by the controller).

Tests call `record("kills survived")` etc. as each thing they prove happens; `pytest_terminal_summary`
prints the totals (only when a reliability test ran). Every hostile input counts as tried; `record("hostile
inputs refused")` also counts it as tried, `hostile_tried()` counts one that was defused rather than refused
(escape sequences stripped, an endless body cut off, a hostile value read harmlessly). "messages lost" is
recorded by the tests that compare the chat store with what was committed before a kill, through
`counting_losses`: the count is recorded before any assertion about it can stop the test, so a loss shows in
the summary as well as failing the test (tests/reliability/test_counters.py plants one to prove it).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Hashable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any

import pytest

COUNTS: Counter[str] = Counter()
ORDER = ("kills survived", "engine restarts", "corrupt files rejected", "corrupt files loaded harmlessly",
         "engine crashes on corrupt files", "messages checked after kills", "messages lost",
         "settings files recovered", "download interruptions survived", "hostile inputs tried",
         "hostile inputs refused")


def record(name: str, n: int = 1) -> None:
    COUNTS[name] += n
    if name == "hostile inputs refused":
        COUNTS["hostile inputs tried"] += n


def hostile_tried(n: int = 1) -> None:
    """A hostile input that was defused (not refused): it counts as tried."""
    COUNTS["hostile inputs tried"] += n


class LossTally:
    """Committed messages checked against what a store holds after a kill (the worst check counts: every
    check compares everything committed so far)."""

    def __init__(self) -> None:
        self.lost = 0
        self.checked = 0

    def check(self, committed: Mapping[Hashable, Any], found: Mapping[Hashable, Any]) -> int:
        """Count each committed message that is missing or changed in `found`, then fail if any is."""
        lost_now = sum(1 for key, want in committed.items() if found.get(key) != want)
        self.lost = max(self.lost, lost_now)
        self.checked = max(self.checked, len(committed))
        missing = {k: want for k, want in committed.items() if found.get(k) != want}
        assert lost_now == 0, f"{lost_now} committed message(s) lost or changed: {missing!r}"
        return lost_now


@contextmanager
def counting_losses() -> Iterator[LossTally]:
    """Record "messages lost" and "messages checked after kills" when the block ends, however it ends."""
    tally = LossTally()
    try:
        yield tally
    finally:
        record("messages lost", tally.lost)
        record("messages checked after kills", tally.checked)


def summary_line() -> str:
    names = [k for k in ORDER if k in COUNTS] + sorted(k for k in COUNTS if k not in ORDER)
    if "messages checked after kills" in COUNTS:
        COUNTS.setdefault("messages lost", 0)
        if "messages lost" not in names:
            names.append("messages lost")
    return ", ".join(f"{name} = {COUNTS[name]}" for name in names)


def pytest_sessionfinish(session: Any) -> None:
    """In a pytest-xdist worker: hand this worker's counts to the controller, which prints the summary."""
    output = getattr(session.config, "workeroutput", None)
    if output is not None:
        output["reliability_counts"] = dict(COUNTS)


@pytest.hookimpl(optionalhook=True)  # pytest-xdist's hook: absent when the suite runs in one process
def pytest_testnodedown(node: Any, error: object) -> None:
    """In the pytest-xdist controller: add up each worker's counts as it finishes."""
    COUNTS.update(getattr(node, "workeroutput", {}).get("reliability_counts", {}))


def pytest_terminal_summary(terminalreporter: Any, exitstatus: int, config: Any) -> None:
    if not COUNTS:
        return
    terminalreporter.write_sep("=", "reliability")
    terminalreporter.write_line(summary_line())
