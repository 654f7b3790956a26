"""`seconds_per_launch`: one warm-up call, then ``repeat`` timed calls."""

from gpucourse.run import seconds_per_launch


def test_warm_up_then_repeat():
    calls = []
    seconds = seconds_per_launch(lambda: calls.append(1), repeat=5)
    assert len(calls) == 6 and seconds >= 0


def test_median_seconds_warms_up_and_takes_the_median_of_samples():
    from gpucourse.run import median_seconds

    calls = []
    seconds = median_seconds(lambda: calls.append(1), samples=3, warmup=2, sample_seconds=1e-7)
    assert seconds >= 0 and len(calls) == 2 + 2 + 3 * 2  # warm-up, one timed call (and its own), 3 samples of 1
