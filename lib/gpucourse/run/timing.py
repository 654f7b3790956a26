"""Time launches on a GPU with CUDA events, as the lectures' GPU cells do (`benchmarks/` measure more carefully)."""

from __future__ import annotations


def seconds_per_launch(launch, repeat: int = 20) -> float:
    """Mean time of ``launch()`` over ``repeat`` calls, after one call that compiles and warms up.

    Events recorded on the GPU's stream before and after the calls measure the GPU's time, not
    Python's. Without a GPU the events measure the CPU simulator: meaningless as GPU time.
    """
    from numba import cuda  # noqa: PLC0415 - after the backend is chosen

    launch()
    start, stop = cuda.event(), cuda.event()
    start.record()
    for _ in range(repeat):
        launch()
    stop.record()
    stop.synchronize()
    return cuda.event_elapsed_time(start, stop) / 1e3 / repeat
