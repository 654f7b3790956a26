"""Assignments survive Run All: after it stops at the first unanswered exercise, every exercise works alone,
quietly (nothing on stderr) and with every kernel it defines launched, so compiled for the GPU.

Run All in JupyterLab stops at the first failing cell. Every spec and helper
an exercise needs must already be defined by then (before the first
exercise), and no exercise may use another's names, so that a student can
write and run any exercise, in any order.
"""

import pytest

from conftest import ROOT
from run_all import run_each_exercise_alone

RELEASES = sorted((ROOT / "assignments").glob("*/*.ipynb"))


@pytest.mark.parametrize("release", RELEASES, ids=lambda p: p.parent.name)
def test_each_exercise_runs_alone_after_run_all_stops(release):
    solution = ROOT / "solutions" / release.parent.name / release.name
    replay = run_each_exercise_alone(release, solution)
    assert replay.stopped_at in replay.first_exercise, "Run All of the untouched release stops at exercise 1"
    assert replay.failures == {}, "exercises that fail when run alone with the solution's answers"
    assert replay.stderr == {}, "exercises whose solution writes to stderr"
    assert replay.unchecked == {}, "exercises that define kernels never launched, so never compiled for the GPU"
