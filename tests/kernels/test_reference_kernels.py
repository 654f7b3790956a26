"""Module 2's reference kernels: map, zip, the sum ladder and the axis reduction.

Random non-uniform data, sizes that are not multiples of a block, views that
are not contiguous, poisoned outputs; race-free (the simulator would stop) and
within their access budgets.
"""

import re

import numpy as np
import pytest
from numba.core import types

from gpucourse import simulated, trace
from gpucourse.kernels import axis_reduction, elementwise, reduction
from gpucourse.course import show_source, source_of
from gpucourse.kernels import Tensor, broadcast_shape, coalesce, contiguous_strides
from gpucourse.run.ptx import compile_for_gpu
from gpucourse.run.resources import kernel_resources


@pytest.fixture(autouse=True)
def on_the_simulator():
    """Budgets need the trace, so these run on the simulator on a GPU machine too."""
    with simulated():
        yield


def scale_shift(x):
    return x * 3 - 1


def scaled_and_shifted(x: np.ndarray) -> np.ndarray:
    """`scale_shift` as numba types it: float32 * 3 is float64 (the int literal is an int64), rounded to float32
    once by the store; NumPy in float32 rounds twice, an ulp apart where x * 3 is close to 1."""
    return (x.astype(np.float64) * 3 - 1).astype(np.float32)


def multiply(x, y):
    return x * y


def larger(x, y):
    return max(x, y)


def add(x, y):
    return x + y


rng = np.random.default_rng(42)


def random(shape):
    return rng.standard_normal(shape).astype(np.float32) * rng.uniform(0.5, 4)


def poisoned(shape):
    return Tensor.from_numpy(np.full(shape, np.nan, np.float32))


def test_tensor_views_share_storage():
    t = Tensor.from_numpy(np.arange(24, dtype=np.float32).reshape(2, 3, 4))
    assert t.strides == contiguous_strides((2, 3, 4)) == (12, 4, 1)
    assert t.T.shape == (4, 3, 2) and t.T.strides == (1, 4, 12)
    assert t.T.storage is t.storage
    np.testing.assert_array_equal(t.permute(1, 0, 2).numpy(), t.numpy().transpose(1, 0, 2))
    np.testing.assert_array_equal(t.narrow(2, 1, 2).numpy(), t.numpy()[:, :, 1:3])
    assert t.position((1, 2, 3)) == 23
    assert t.permute([1, 0, 2]).strides == t.permute((1, 0, 2)).strides == t.permute(1, 0, 2).strides == (4, 12, 1)
    for outside in ((2, 0, 0), (0, -1, 0), (1, 2)):  # past an axis, negative, one index short
        with pytest.raises(IndexError, match=f"index {re.escape(str(outside))} is not an element of a tensor of shape"):
            t.position(outside)
    wide = Tensor.from_numpy(np.arange(3, dtype=np.float32).reshape(3, 1)).broadcast_to((2, 3, 4))
    assert wide.strides == (0, 1, 0)
    np.testing.assert_array_equal(wide.numpy(), np.broadcast_to(np.arange(3).reshape(3, 1), (2, 3, 4)))
    assert broadcast_shape((5, 1), (3, 1, 7)) == (3, 5, 7)
    with pytest.raises(ValueError, match="do not broadcast"):
        broadcast_shape((2, 3), (4, 3))
    with pytest.raises(ValueError, match="at most 4 dimensions"):
        Tensor.from_numpy(np.zeros((1,) * 5))


def test_coalesce_merges_what_every_tensor_walks_as_one():
    assert coalesce((2, 3, 4), (12, 4, 1)) == ((24,), [(1,)])
    assert coalesce((2, 3, 4), (12, 4, 1), (0, 4, 1)) == ((2, 12), [(12, 1), (0, 1)])
    assert coalesce((4, 3), (1, 4)) == ((4, 3), [(1, 4)])  # a transpose stays 2-D
    assert coalesce((3, 1, 5), (5, 5, 1), (0, 0, 1)) == ((3, 5), [(5, 1), (0, 1)])
    assert coalesce((1, 1), (1, 1)) == ((1,), [(1,)])
    assert coalesce((), ()) == ((1,), [(0,)])


def test_a_contiguous_map_runs_one_dimensional():
    """Each thread reads its index back once per dimension, for out and for a: 2 x 1, or 2 x 3."""
    a = Tensor.from_numpy(random((3, 4, 5)))
    reads = {}
    for name, view in (("contiguous", a), ("transposed", a.T)):
        out = poisoned(view.shape)
        with trace() as t:
            elementwise.launch_elementwise(elementwise.make_map(scale_shift), out, view, threads=64)
        np.testing.assert_array_equal(out.numpy(), scaled_and_shifted(view.numpy()))
        reads[name] = int(t.reads_per_thread("index").max())
    assert reads == {"contiguous": 2, "transposed": 6}


@pytest.mark.parametrize("grid_stride", [False, True])
@pytest.mark.parametrize("shape, view", [((37,), None), ((3, 5, 7), "T"), ((2, 3, 4, 5), "narrow")])
def test_map_on_views(shape, view, grid_stride):
    a = Tensor.from_numpy(random(shape))
    if view == "T":
        a = a.T
    elif view == "narrow":
        a = a.narrow(3, 1, 3)
    out = poisoned(a.shape)
    kernel = elementwise.make_map(scale_shift, grid_stride=grid_stride)
    with trace() as t:
        elementwise.launch_elementwise(kernel, out, a, threads=32, blocks=2 if grid_stride else None)
    np.testing.assert_array_equal(out.numpy(), scaled_and_shifted(a.numpy()))
    t.assert_writes_per_element("out", exactly=1)
    reads = t.reads_per_element("a")  # the whole storage: only the view's elements, once each
    assert reads.sum() == a.size and reads.max() == 1


@pytest.mark.parametrize("a_shape, b_shape", [((6, 9), (6, 9)), ((4, 1, 7), (5, 1)), ((33,), (1,))])
def test_zip_broadcasts_with_stride_zero(a_shape, b_shape):
    a, b = Tensor.from_numpy(random(a_shape)), Tensor.from_numpy(random(b_shape))
    shape = broadcast_shape(a_shape, b_shape)
    out = poisoned(shape)
    with trace() as t:
        elementwise.launch_elementwise(elementwise.make_zip(multiply), out, a, b, threads=64)
    np.testing.assert_allclose(out.numpy(), a.numpy() * b.numpy(), rtol=1e-6)
    t.assert_writes_per_element("out", exactly=1)
    assert t.reads_per_element("b").sum() == out.size  # broadcast elements are read once per use


def test_a_map_on_device_tensors_is_the_same_launch():
    """What lecture 2a times on a GPU: the traced launch, with storage already on the device."""
    view = Tensor.from_numpy(random((6, 10))).narrow(1, 2, 5).T
    on_device = view.to_device()
    assert (on_device.shape, on_device.strides, on_device.offset) == (view.shape, view.strides, view.offset)
    out = poisoned(view.shape)
    d_out = out.to_device()
    kernel = elementwise.make_map(scale_shift)
    with trace() as t:
        elementwise.launch_elementwise(kernel, d_out, on_device, threads=32)
    got = d_out.storage.copy_to_host().reshape(view.shape)
    np.testing.assert_array_equal(got, scaled_and_shifted(view.numpy()))
    assert t.reads_per_element("a").sum() == view.size


def test_zip_of_a_tensor_and_its_transpose():
    a = Tensor.from_numpy(random((17, 17)))
    out = poisoned((17, 17))
    elementwise.launch_elementwise(elementwise.make_zip(multiply), out, a, a.T, threads=32)
    np.testing.assert_allclose(out.numpy(), a.numpy() * a.numpy().T, rtol=1e-6)


def test_elementwise_refuses_shapes_that_do_not_broadcast():
    with pytest.raises(ValueError, match="do not broadcast"):
        elementwise.launch_elementwise(elementwise.make_map(scale_shift), poisoned((3, 4)),
                                       Tensor.from_numpy(random((4, 3))))


def test_the_launchers_take_tensors_and_a_positive_count_of_threads():
    a, out = Tensor.from_numpy(random((3, 4))), poisoned((3, 4))
    square = elementwise.make_map(scale_shift)
    with pytest.raises(TypeError, match=r"launch_elementwise takes Tensors, not ndarray \(its out\): make one with "
                                        r"Tensor.from_numpy\(array\)"):
        elementwise.launch_elementwise(square, out.numpy().copy(), a)
    with pytest.raises(TypeError, match=r"launch_vectorised takes Tensors, not list \(its input 1\)"):
        elementwise.launch_vectorised(elementwise.make_map_vectorised(scale_shift), out, [1.0], sms=1)
    for threads in (0, -32, 32.0):
        with pytest.raises(ValueError, match=f"threads is the threads per block, a whole number from 1 up .* not "
                                             f"{threads!r}"):
            elementwise.launch_elementwise(square, out, a, threads=threads)


@pytest.mark.parametrize("kernel", reduction.LADDER, ids=lambda k: k.py_func.__name__)
@pytest.mark.parametrize("size", [1, 255, 1000, 5001])
def test_sum_ladder(kernel, size):
    a = random(size)
    total = reduction.block_sums_to_total(kernel, a).copy_to_host()[0]
    np.testing.assert_allclose(total, a.sum(dtype=np.float64), rtol=1e-5, atol=1e-4)


@pytest.mark.parametrize("kernel", reduction.LADDER, ids=lambda k: k.py_func.__name__)
def test_sum_ladder_budgets(kernel):
    a = random(3000)
    with trace() as t:
        reduction.block_sums_to_total(kernel, a, blocks=3)
    first = t[0]
    first.assert_reads_per_element("a", exactly=1)  # every step reads each element from global memory once
    # step 7's 16-byte loads: 512 bytes per warp request, 16 sectors; the others' 4-byte loads 4 sectors
    assert first.sectors_per_request("a") <= (16.0 if kernel is reduction.sum_grid_stride_vectorised else 4.0)
    if kernel in reduction.ONE_LAUNCH:
        assert len(t) == 1 and first.array("total").per_thread["atomic"].sum() == 3  # one atomic per block
        first.assert_reads_per_thread("a", at_most=-(-3000 // (3 * reduction.THREADS)))
    if kernel is reduction.sum_interleaved_compact:
        assert first.bank_conflicts("buffer") > 1
    else:
        first.assert_no_bank_conflicts()


@pytest.mark.parametrize("n, offset, blocks", [(70_003, 0, 8), (5001, 0, 1), (4099, 1, 3), (1030, 2, 5), (3, 0, 2)])
def test_vectorised_sum_any_length_alignment_and_grid(n, offset, blocks):
    """Whole rounds of CHUNKS loads (70,003 with 8 blocks: 2), a partial round, a scalar tail of 3; not 16-byte
    aligned (offset 1 or 2): every element as a scalar. Each element read once, one atomic add per block."""
    storage = random(n + offset)
    a = storage[offset:]
    total = np.array([0, np.nan], np.float32)  # the atomics add into total[0]; total[1] must stay poisoned
    with trace() as t:
        reduction.sum_grid_stride_vectorised[blocks, reduction.THREADS](total, a)
    np.testing.assert_allclose(total[0], a.sum(dtype=np.float64), rtol=1e-5, atol=1e-4)
    assert np.isnan(total[1])
    t.assert_reads_per_element("a", exactly=1)
    assert t.array("total").per_thread["atomic"].sum() == blocks
    if offset == 0 and n > 1000:  # 16-byte loads: 512 bytes, 16 sectors a warp request (fewer in partial warps)
        assert 15 < t.sectors_per_request("a") <= 16
    else:  # 4-byte loads: a warp's 128 bytes, 5 sectors where they start off a sector's boundary
        assert t.sectors_per_request("a") <= 5


def test_vectorised_sum_compiles_to_16_byte_loads_in_registers():
    signature = (types.float32[::1],) * 2
    ptx = compile_for_gpu(reduction.sum_grid_stride_vectorised, signature)
    assert len(re.findall(r"ld\.global\.v4\.f32", ptx)) >= elementwise.CHUNKS + 1  # a round's loads, the partial one
    assert not re.search(r"\b(ld|st)\.local\b", ptx)
    used = kernel_resources(reduction.sum_grid_stride_vectorised, signature, "sm_90")
    if used is not None:  # None without nvJitLink
        assert used.local_bytes == used.spilled_bytes == 0
        assert used.registers * reduction.THREADS * 4 <= 65536  # its launch bounds: 4 blocks of 256 per SM


def test_interleaved_addressing_leaves_warps_mostly_idle():
    a = random(2048)
    with trace() as interleaved:
        reduction.sum_interleaved[8, reduction.THREADS](np.zeros(8, np.float32), a)
    with trace() as sequential:
        reduction.sum_sequential[8, reduction.THREADS](np.zeros(8, np.float32), a)
    # Both do 255 additions per block; the interleaved tree spreads them over more, emptier warps.
    assert interleaved.threads_per_request("buffer") < sequential.threads_per_request("buffer")
    assert interleaved.array("buffer").instructions["read"].requests > sequential.array("buffer").instructions["read"].requests


@pytest.mark.parametrize("shape, view", [((4, 300, 6), None), ((50, 3, 7), "T"), ((129,), None)])
def test_axis_reduce_any_axis(shape, view):
    a = Tensor.from_numpy(random(shape))
    a = a.T if view == "T" else a
    summing = axis_reduction.make_axis_reduce(add, 0.0)
    biggest = axis_reduction.make_axis_reduce(larger, -np.inf)
    for axis in range(a.ndim):
        kept = a.shape[:axis] + (1,) + a.shape[axis + 1:]
        total, top = poisoned(kept), poisoned(kept)
        with trace() as t:
            axis_reduction.launch_axis_reduce(summing, total, a, axis)
        axis_reduction.launch_axis_reduce(biggest, top, a, axis)
        np.testing.assert_allclose(total.numpy(), a.numpy().sum(axis, keepdims=True), rtol=1e-5, atol=1e-4)
        np.testing.assert_array_equal(top.numpy(), a.numpy().max(axis, keepdims=True))
        t.assert_reads_per_element("a", exactly=1)
        t.assert_writes_per_element("out", exactly=1)


def test_axis_reduce_refuses_a_wrong_output_shape():
    a = Tensor.from_numpy(random((3, 4)))
    kernel = axis_reduction.make_axis_reduce(add, 0.0)
    with pytest.raises(ValueError, match=r"gives shape \(3, 1\), but out has \(3,\)"):
        axis_reduction.launch_axis_reduce(kernel, poisoned((3,)), a, 1)


def test_lectures_can_show_the_source():
    assert source_of(reduction.sum_sequential).startswith("@cuda.jit\ndef sum_sequential(partial, a):")
    shown = show_source(reduction.warp_sum, reduction.sum_warp_shuffle)
    assert shown.data.startswith("```python\n@cuda.jit(device=True)\ndef warp_sum(value):")
    exec("def built_from_a_string(): pass", namespace := {})
    for nothing_to_show in ("sum_sequential", None, len, namespace["built_from_a_string"]):
        with pytest.raises(TypeError, match="show_source shows the code of a function, kernel or module defined in a "
                                            f"cell or a .py file, not {re.escape(repr(nothing_to_show))}"):
            show_source(nothing_to_show)


def test_sources_can_leave_their_docstrings_out():
    """For a slide: the docstrings of a builder and of the functions inside it go, its code and comments stay."""
    from gpucourse.kernels import fusion

    whole, code = source_of(fusion.make_micro_tile), source_of(fusion.make_micro_tile, docstrings=False)
    assert '"""' in whole and '"""' not in code
    assert "def micro_tile_product(" in code and "# unsigned indices" in code
    assert set(code.splitlines()) <= set(whole.splitlines())
