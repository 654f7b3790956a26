"""`timing`: warm-up, a calibrating sample, samples of calls cycling over the launches, the median.

No time is asserted: on the simulator the events time the CPU.
"""

import pytest

from gpucourse.run import median_seconds, ptx, seconds_per_launch, timing


def test_seconds_per_launch_warms_up_then_repeats():
    calls = []
    seconds = seconds_per_launch(lambda: calls.append(1), repeat=5)
    assert len(calls) == 6 and seconds >= 0


def test_seconds_per_launch_on_a_gpu_queues_its_calls_behind_the_sleeping_kernel(monkeypatch):
    samples = []

    def fake_sample(launches, count, hold_us=0):
        samples.append((count, hold_us))
        return 1e-6, 2e-5, True  # GPU and host seconds per call

    monkeypatch.setattr(timing, "chosen_backend", lambda: type("GPU", (), {"on_gpu": True})())
    monkeypatch.setattr(timing, "sample", fake_sample)
    assert seconds_per_launch(lambda: None, repeat=10) == 1e-6
    assert samples == [(1, 1), (10, int(1.5 * 2e-5 * 10 * 1e6) + 1000)]  # host time of one call, then held


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
