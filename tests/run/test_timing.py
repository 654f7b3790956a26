"""`seconds_per_launch`: one warm-up call, then ``repeat`` timed calls."""

from gpucourse.run import seconds_per_launch


def test_warm_up_then_repeat():
    calls = []
    seconds = seconds_per_launch(lambda: calls.append(1), repeat=5)
    assert len(calls) == 6 and seconds >= 0
