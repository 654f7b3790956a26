"""Device functions defined in another module than the kernels that call them."""

from numba import cuda


@cuda.jit(device=True)
def square(x):
    return x * x


@cuda.jit(device=True)
def square_plus_one(x):
    return square(x) + 1


@cuda.jit(device=True)
def doubled(x, row, col, divided):  # divided: ignored (tests/run/test_issue.py's kernels pass it)
    return x[row, col] * 2


def calling(helper):
    """A new device function of this file that calls ``helper(x, row, col, divided)``."""
    @cuda.jit(device=True)
    def call(x, row, col, divided):
        return helper(x, row, col, divided)

    return call
