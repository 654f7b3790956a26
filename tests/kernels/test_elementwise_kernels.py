"""Module 2's elementwise kernels: Tensor views, map and zip on any strides and broadcasts, and the vectorised map
and zip (any length, aligned or not, several grids; 16-byte loads and no local memory).

Random non-uniform data, sizes that are not multiples of a block, views that are not contiguous, poisoned outputs;
race-free (the simulator would stop) and within their access budgets.
"""

import re

import numpy as np
import pytest
from numba import types

from gpucourse import simulated, trace
from gpucourse.kernels import Tensor, broadcast_shape, coalesce, contiguous_strides, elementwise
from gpucourse.run.ptx import compile_for_gpu


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


def cube_plus_one(x):  # numba adds the integer 1 in float64, then rounds to float32 when storing
    return x * x * x + 1


def weighted(x, y):
    return 3 * x - y


MAP, ZIP = elementwise.make_map_vectorised(cube_plus_one), elementwise.make_zip_vectorised(weighted)
ARRAY1 = types.Array(types.float32, 1, "C")


def vector(n, offset=0):
    """``n`` random non-uniform floats starting ``offset`` floats into their storage (1: not 16-byte aligned)."""
    storage = (rng.standard_normal(n + offset) * rng.uniform(0.1, 10, n + offset)).astype(np.float32)
    return Tensor(storage, (n,), (1,), offset)


@pytest.mark.parametrize("n, offset, sms, threads, per_sm", [
    (1000, 0, 2, 64, 1), (1003, 0, 1, 32, 3), (4099, 1, 2, 128, 2), (3, 0, 1, 32, 1), (130, 3, 3, 32, 1)])
def test_any_length_alignment_and_grid(n, offset, sms, threads, per_sm):
    a, b = vector(n, offset), vector(n)
    x, y = a.storage[offset:], b.storage
    with simulated():
        out = Tensor(np.full(n + 5, np.nan, np.float32), (n,), (1,))
        elementwise.launch_vectorised(MAP, out, a, sms=sms, threads=threads, blocks_per_sm=per_sm)
        np.testing.assert_array_equal(out.storage[:n], ((x * x * x).astype(np.float64) + 1).astype(np.float32))
        assert np.isnan(out.storage[n:]).all()  # nothing past the end
        out = Tensor(np.full(n, np.nan, np.float32), (n,), (1,))
        elementwise.launch_vectorised(ZIP, out, a, b, sms=sms, threads=threads, blocks_per_sm=per_sm)
        np.testing.assert_array_equal(out.storage, (3 * x.astype(np.float64) - y).astype(np.float32))


def test_strided_or_broadcast_tensors_are_refused_with_a_clear_message():
    a = Tensor.from_numpy(rng.standard_normal((4, 6)).astype(np.float32))
    with pytest.raises(ValueError, match="contiguous tensors of one shape"):
        elementwise.launch_vectorised(MAP, Tensor.from_numpy(np.zeros((6, 4), np.float32)), a.T, sms=1)


@pytest.mark.parametrize("kernel, arguments", [(MAP, 2), (ZIP, 3)], ids=["map", "zip"])
def test_compiled_code_has_vector_loads_and_no_local_memory(kernel, arguments):
    ptx = compile_for_gpu(kernel, (ARRAY1,) * arguments)
    assert len(re.findall(r"ld\.global\.v4\.f32", ptx)) >= elementwise.CHUNKS * (arguments - 1)
    assert "st.global.v4.f32" in ptx
    assert not re.search(r"\b(ld|st)\.local\b", ptx)
