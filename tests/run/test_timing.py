"""`timing`: warm-up, a calibrating sample, samples of calls cycling over the launches, the median.

No time is asserted: on the simulator the events time the CPU.
"""

import pytest

from gpucourse.run import median_seconds, ptx, seconds_per_launch, timing


def test_seconds_per_launch_warms_up_then_repeats():
    calls = []
    seconds = seconds_per_launch(lambda: calls.append(1), repeat=5)
    assert len(calls) == 6 and seconds >= 0


def test_calls_per_sample():
    assert timing.calls_per_sample(1e-3, sets=1) == 10  # SAMPLE_SECONDS of GPU time
    assert timing.calls_per_sample(1e-7, sets=128) == 896  # MAX_QUEUED, a multiple of the sets
    assert timing.calls_per_sample(1e-7, sets=1, kernel_launches=4) == timing.MAX_QUEUED // 4
    assert timing.calls_per_sample(50e-3, sets=3) == 3  # each set at least once


def test_measure_warms_up_calibrates_then_cycles_over_the_launches(monkeypatch):
    calls = []
    launches = [lambda: calls.append("a"), lambda: calls.append("b"), lambda: calls.append("c")]
    monkeypatch.setattr(timing, "SAMPLE_SECONDS", 0.0)  # a sample of one call per launch
    timed = timing.measure(launches, samples=3, warmup=2)
    assert calls == ["a", "b", "c"] * (2 + 1 + 3)  # warm-up, the calibrating sample, 3 samples
    assert timed.seconds >= 0 and not timed.queued  # the simulator holds nothing while the calls are queued


def test_median_seconds_is_measure_of_one_launch(monkeypatch):
    calls = []
    monkeypatch.setattr(timing, "SAMPLE_SECONDS", 0.0)
    assert median_seconds(lambda: calls.append(1), samples=3, warmup=1) >= 0
    assert len(calls) == 1 + 1 + 3


@pytest.mark.skipif(ptx.toolchain_problem() is not None, reason="no NVVM to compile for the GPU")
def test_the_sleeping_kernel_compiles_for_the_gpu():
    from numba import types

    assert "nanosleep" in ptx.compile_for_gpu(timing.hold_kernel(), (types.uint32,))
