"""benchmarks/common.py's `TimeBudget`: the goals' rows first, then the others while the time lasts, on a fake clock."""

import sys

from conftest import ROOT

sys.path.insert(0, str(ROOT / "benchmarks"))
from common import TimeBudget  # noqa: E402


class Clock:
    """Time that passes only when a row is measured: ``measure(seconds)``."""

    def __init__(self):
        self.now = 0.0

    def __call__(self) -> float:
        return self.now

    def measure(self, seconds: float) -> None:
        self.now += seconds


def measured(budget: TimeBudget, clock: Clock, rows, seconds: float = 10.0, **options) -> list:
    """The rows ``budget`` lets through, in its order, each taking ``seconds``."""
    done = []
    for row in budget.rows(rows, **options):
        clock.measure(seconds)
        done.append(row)
    return done


def test_the_goals_come_first_and_the_others_keep_their_order():
    clock = Clock()
    budget = TimeBudget(None, clock=clock)
    assert measured(budget, clock, [1, 2, 3, 4, 5], first={"4", "2"}) == [2, 4, 1, 3, 5]
    assert budget.complete and budget.note("any.py") == ""


def test_a_row_starts_only_while_the_longest_so_far_still_fits_and_the_rest_are_named(capsys):
    clock = Clock()
    budget = TimeBudget(25, clock=clock)  # 0 + 10 and 10 + 10 fit in 25 s; 20 + 10 does not
    sizes = [512, 1024, 4096, 8192]
    assert measured(budget, clock, sizes, label=lambda n: f"{n}^3", first={"4096^3"}) == [4096, 512]
    assert budget.left_out == ["1024^3", "8192^3"] and not budget.complete  # named by their labels
    note = budget.note("matmul.py")
    assert "1024^3, 8192^3" in note and "25 s" in note and "benchmarks/matmul.py" in note and "4096" not in note
    assert capsys.readouterr().out.splitlines() == ["  [4096^3: 10.0 s]", "  [512^3: 10.0 s]"]  # for the log


def test_the_first_row_always_runs():
    clock = Clock()
    budget = TimeBudget(0, clock=clock)
    assert measured(budget, clock, ["a", "b"], seconds=100) == ["a"]
    assert budget.left_out == ["b"]


def test_two_loops_share_one_clock():
    """fusion.py's softmax shapes, then its attention sizes: the second loop goes on from the first one's time."""
    clock = Clock()
    budget = TimeBudget(35, clock=clock)
    assert measured(budget, clock, ["softmax 1", "softmax 2"]) == ["softmax 1", "softmax 2"]
    assert measured(budget, clock, ["attention 1", "attention 2"], first={"attention 2"}) == ["attention 2"]
    assert budget.left_out == ["attention 1"]  # at 30 s, another 10 s row would end past 35 s
    assert "attention 1" in budget.note("fusion.py") and "softmax" not in budget.note("fusion.py")
