"""The copy count of the simulated device memory and lecture 1's copy puzzle check (`check_copies`)."""

import numpy as np
import pytest
from numba import cuda

from gpucourse.grading import CheckFailed, check_copies
from gpucourse.run import counting_copies


@cuda.jit
def add(out, x, y):
    i = cuda.grid(1)
    if i < x.size:
        out[i] = x[i] + y[i]


def blocks(x):
    return (x.size + 127) // 128, 128


def triple(x):  # the puzzle's starting point: NumPy arguments, 3 + 3 copies in and 3 + 3 back
    tmp, out = np.empty_like(x), np.empty_like(x)
    add[blocks(x)](tmp, x, x)
    add[blocks(x)](out, tmp, x)
    return out


def triple_on_device(x):
    d_x = cuda.to_device(x)
    d_tmp, d_out = cuda.device_array_like(x), cuda.device_array_like(x)
    add[blocks(x)](d_tmp, d_x, d_x)
    add[blocks(x)](d_out, d_tmp, d_x)
    return d_out.copy_to_host()


def spec(x):
    return (x + x) + x


def test_copies_are_counted_for_each_way_of_copying():
    x = np.random.default_rng(0).standard_normal(300).astype(np.float32)
    with counting_copies() as copies:
        triple(x)
    assert (copies.to_device, copies.to_host) == (6, 6)
    with counting_copies() as copies:
        d = cuda.to_device(x)                     # 1 in
        d.copy_to_device(x)                       # 1 in
        d[:10] = x[:10]                           # 1 in
        d[0] = 1.0                                # a number: not counted as an array copy
        cuda.to_device(x, to=d)                   # 1 in
        d.copy_to_device(cuda.to_device(x))       # 1 in (the to_device), device to device: none
        out = cuda.device_array_like(x)           # none
        add[blocks(x)](out, d, cuda.In(x))        # 1 in
        add[blocks(x)](cuda.Out(np.empty_like(x)), d, d)  # 1 back
        add[blocks(x)](cuda.InOut(np.empty_like(x)), d, d)  # 1 in, 1 back
        out.copy_to_host()                        # 1 back
    assert (copies.to_device, copies.to_host) == (7, 3)
    with counting_copies() as outer:
        with counting_copies() as inner:
            cuda.to_device(x)
        cuda.to_device(x)
    assert (inner.to_device, outer.to_device) == (1, 2)


def test_the_device_version_passes(capsys):
    check_copies(triple_on_device, spec)
    assert capsys.readouterr().out == "✓ triple_on_device: correct on 3 calls\n"


def copies_back_both(x):
    d_x = cuda.to_device(x)
    d_tmp, d_out = cuda.device_array_like(x), cuda.device_array_like(x)
    add[blocks(x)](d_tmp, d_x, d_x)
    add[blocks(x)](d_out, d_tmp, d_x)
    d_tmp.copy_to_host()
    return d_out.copy_to_host()


def copies_x_twice(x):
    d_tmp, d_out = cuda.device_array_like(x), cuda.device_array_like(x)
    add[blocks(x)](d_tmp, cuda.to_device(x), cuda.to_device(x))
    add[blocks(x)](d_out, d_tmp, cuda.to_device(x))
    return d_out.copy_to_host()


def one_launch_on_numpy(x):
    d_x = cuda.to_device(x)
    d_tmp = cuda.device_array_like(x)
    add[blocks(x)](d_tmp, d_x, d_x)
    out = np.empty_like(x)
    add[blocks(x)](out, d_tmp, x)  # out and x are copied both ways
    return out


def returns_the_device_array(x):
    d_x = cuda.to_device(x)
    d_tmp, d_out = cuda.device_array_like(x), cuda.device_array_like(x)
    add[blocks(x)](d_tmp, d_x, d_x)
    add[blocks(x)](d_out, d_tmp, d_x)
    return d_out


def doubles_only(x):
    d_x = cuda.to_device(x)
    d_out = cuda.device_array_like(x)
    add[blocks(x)](d_out, d_x, d_x)
    return d_out.copy_to_host()


def unwritten(x):
    raise NotImplementedError()


def too_few_blocks(x):
    d_x = cuda.to_device(x)
    d_tmp, d_out = cuda.device_array_like(x), cuda.device_array_like(x)
    add[1, 128](d_tmp, d_x, d_x)  # elements past 127 keep what the allocation held
    add[1, 128](d_out, d_tmp, d_x)
    return d_out.copy_to_host()


def reads_past_the_end(x):
    d_x = cuda.to_device(x)
    d_out = cuda.device_array((x.size - 1,), np.float32)  # one short: the last thread writes past its end
    add[blocks(x)](d_out, d_x, d_x)
    return d_out.copy_to_host()


@pytest.mark.parametrize("function, message", [
    (triple, r"^triple gives the right result, but copies 6 arrays to the device and 6 back\n  \(should be 1 and 1\)"),
    (copies_back_both, r"right result, but copies 1 arrays to the device and 2 back\n"),
    (copies_x_twice, r"right result, but copies 3 arrays to the device and 1 back\n"),
    (one_launch_on_numpy, r"right result, but copies 3 arrays to the device and 2 back\n"),
    (returns_the_device_array, r"returns a device array: return the host array that \.copy_to_host\(\) gives"),
    (doubles_only, r"doubles_only\(x\) for x of 1 float32: element \[0\] should be .*, got .* \(1 of 1 wrong\)"),
    (unwritten, r"unwritten is not written yet"),
    (too_few_blocks, r"too_few_blocks\(x\) for x of 1000 float32: element \[128\] should be .* \(872 of 1000 wrong\)"),
    (reads_past_the_end, r"reads_past_the_end\(array\(\[.*\) raised OutOfBounds: "),
])
def test_wrong_answers_get_a_message(function, message):
    with pytest.raises(CheckFailed, match=message):
        check_copies(function, spec)


def second_step_in_numpy(x):  # one launch on the device, the second addition on the host
    d_x = cuda.to_device(x)
    d_tmp = cuda.device_array_like(x)
    add[blocks(x)](d_tmp, d_x, d_x)
    return d_tmp.copy_to_host() + x


def test_a_step_done_in_numpy_is_told_to_launch_it():
    """The copies of x + x on the device and the last addition in NumPy are right (1 in, 1 back): the launches are
    not, where the exercise counts them; 3 * x in NumPy launches nothing."""
    check_copies(second_step_in_numpy, spec, quiet=True)  # no count of launches asked for
    with pytest.raises(CheckFailed, match=r"^second_step_in_numpy gives the right result, but launches 1 kernel; the "
                                          r"exercise launches 2, each step on the device"):
        check_copies(second_step_in_numpy, spec, launches=2)
    with pytest.raises(CheckFailed, match=r"but launches no kernel: it computes on the host, with NumPy"):
        check_copies(lambda x: 3 * x, spec, launches=2)
    check_copies(triple_on_device, spec, launches=2, quiet=True)


def one_block_short(x):  # right on 1 float; on 1000 the second launch reads what the first never wrote
    d_x = cuda.to_device(x)
    d_tmp, d_out = cuda.device_array_like(x), cuda.device_array_like(x)
    grid, block = blocks(x)
    add[max(grid - 1, 1), block](d_tmp, d_x, d_x)
    add[grid, block](d_out, d_tmp, d_x)
    return d_out.copy_to_host()


def test_a_call_that_fails_on_a_large_array_names_the_array_by_its_shape():
    """Lecture 1's copy puzzle: the message of a call that raised on 1000 floats held their repr, 200 lines."""
    with pytest.raises(CheckFailed) as failed:
        check_copies(one_block_short, spec)
    message = str(failed.value)
    assert message.startswith("one_block_short(<float32 array of shape (1000,)>) raised UninitializedRead: "), message
    assert len(message.splitlines()) <= 3 and len(message) < 600, message
