"""Lecture 5's puzzle check (`check_row_group_max`): right, unwritten and plausible wrong answers."""

from numba import cuda, float32

from gpucourse import simulated
from gpucourse.grading import check_row_group_max


def shuffled(offsets, down=False, add=False):
    """A lane's value combined with the lanes ``offsets`` away: by xor (or ``down``), by max (or ``add``)."""

    @cuda.jit
    def kernel(out, values):
        i = cuda.grid(1)
        v = values[i]
        for offset in offsets:
            other = cuda.shfl_down_sync(0xFFFFFFFF, v, offset) if down else cuda.shfl_xor_sync(0xFFFFFFFF, v, offset)
            v = v + other if add else max(v, other)
        out[i] = v

    return kernel


right = shuffled((16, 8, 4))
whole_warp = shuffled((16, 8, 4, 2, 1))  # offsets 2 and 1 mix the groups
consecutive = shuffled((4, 2, 1))  # groups of 8 consecutive lanes: the max over the wrong lanes
one_step_short = shuffled((16, 8))
sixteen_missing = shuffled((4, 8))
summed = shuffled((16, 8, 4), add=True)
shifted_down = shuffled((16, 8, 4), down=True)


@cuda.jit
def unwritten(out, values):
    i = cuda.grid(1)
    out[i] = values[i]


@cuda.jit
def through_shared(out, values):
    group = cuda.shared.array(128, float32)
    i, t = cuda.grid(1), cuda.threadIdx.x
    group[t] = values[i]
    cuda.syncthreads()
    first = t - t % 32 + t % 4  # the group: lanes first, first + 4, ..., first + 28 of the warp
    v = group[first]
    for k in range(1, 8):
        v = max(v, group[first + 4 * k])
    out[i] = v


def test_the_puzzle_check(capsys):
    with simulated():
        assert check_row_group_max(right) is True
        assert check_row_group_max(unwritten) is None
        assert check_row_group_max(whole_warp) is False
        assert "belongs to another group: an xor offset that changes lane % 4 mixes groups" in capsys.readouterr().out
        assert check_row_group_max(consecutive) is False
        assert "values[0:32:4]" in capsys.readouterr().out
        assert check_row_group_max(one_step_short) is False
        assert "max of some lanes of the group only: together the offsets must reach all 8" in capsys.readouterr().out
        assert check_row_group_max(sixteen_missing) is False
        said = capsys.readouterr().out
        assert ("Offsets that keep lane % 4 are multiples of 4; how many xor steps reach all 8 lanes of the group?"
                in said), said
        assert said.startswith("✗ Not yet: with 1 block") and "shfl_down" not in said  # it used xor
        assert "16" not in said.split("\n", 1)[1], "the hint gives the missing offset away"
        assert check_row_group_max(summed) is False
        assert "the group's sum: combine the values with max, not +" in capsys.readouterr().out
        assert check_row_group_max(shifted_down) is False
        assert "shfl_down leaves the last lanes" in capsys.readouterr().out
        assert check_row_group_max(through_shared) is False
        assert "uses shared memory" in capsys.readouterr().out
